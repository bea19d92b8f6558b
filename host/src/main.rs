fn main() -> std::process::ExitCode {
    rawko::cli::main()
}
