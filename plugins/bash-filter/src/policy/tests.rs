//! Unit tests of the checker's pure helpers, in their own file to keep `policy.rs` short.

use super::paths::{lexical, path_candidates};
use super::wrappers::shell_script;

#[test]
fn shell_scripts_are_found_after_options() {
    let v = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(shell_script(&v("-c ls")).unwrap().as_deref(), Some("ls"));
    assert_eq!(shell_script(&v("-lc ls x")).unwrap().as_deref(), Some("ls"));
    assert_eq!(
        shell_script(&v("-e -o pipefail -c ls")).unwrap().as_deref(),
        Some("ls")
    );
    assert_eq!(shell_script(&v("script.sh")).unwrap(), None);
    assert!(shell_script(&v("-s")).is_err());
    assert!(shell_script(&v("--rcfile x -c ls")).is_err());
}

#[test]
fn lexical_paths_ignore_the_filesystem() {
    assert_eq!(lexical("/ws/src", "../a/./b"), "/ws/a/b");
    assert_eq!(lexical("/ws", "x/"), "/ws/x");
    assert_eq!(lexical("/", ".."), "/");
}

#[test]
fn path_candidates_find_escapes() {
    assert_eq!(path_candidates("/etc/passwd"), ["/etc/passwd"]);
    assert_eq!(path_candidates("--file=/etc/x"), ["/etc/x"]);
    assert_eq!(path_candidates("if=../x"), ["../x"]);
    assert_eq!(path_candidates("-o/tmp/x"), ["/tmp/x"]);
    assert!(path_candidates("src/main.rs").is_empty());
    assert!(path_candidates("a && b").is_empty());
}
