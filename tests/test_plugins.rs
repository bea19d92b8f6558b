//! A test for every test plugin: `rawko_test_artifacts::foreach_test_plugin!` names each plugin
//! the artifacts crate builds, and each name must resolve here, to the tests that use that
//! plugin, or the integration tests do not compile. Adding a test plugin means adding its tests
//! and naming them below.

/// `use self::NAME as _;`: fails to compile when no test is named after the plugin below.
macro_rules! assert_test_exists {
    ($name:ident) => {
        #[allow(unused_imports)]
        use self::$name as _;
    };
}

rawko_test_artifacts::foreach_test_plugin!(assert_test_exists);

/// `hostile-tool`: every attack in `sandbox` is made by it.
use crate::sandbox as hostile_tool;

/// `hostile-adapter`: every attack in `http_attacks` is made by it.
use crate::http_attacks as hostile_adapter;

/// `ask-filter`: a bash filter plugin that asks, denies or allows, after the built-in policy.
use crate::shell::plugin_filters_run_after_the_builtin_and_any_deny_wins as ask_filter;

/// `greeter`: the tool installed, signed, published and updated by `rawko plugin`.
use crate::plugin_install::an_installed_tool_runs_with_only_what_was_granted as greeter;

/// `greeter-net`: the greeter's next version, which asks for more.
use crate::plugin_install::updates_ask_again_for_new_capabilities_and_refuse_new_signers as greeter_net;

/// `socket-tool`: imports wasi:sockets and wasi:http, accepted and denied.
use crate::plugin_install::imports_every_toolchain_makes_are_accepted_and_denied as socket_tool;

/// `greedy-tool`: imports more than its manifest declares.
use crate::plugin_install::plugins_that_exceed_or_lack_their_manifest_are_refused as greedy_tool;

/// `future-tool`: built against a WIT version this rawko does not support.
use crate::plugin_install::plugins_that_exceed_or_lack_their_manifest_are_refused as future_tool;

/// `adapter-openai`: the first-party adapter, installed as a stranger's plugin would be.
use crate::installed_plugins::an_installed_adapter_answers_through_its_granted_host_with_its_granted_key as adapter_openai;
