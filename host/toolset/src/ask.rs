//! Who answers when rawko must ask the user (a bash filter's `ask`, an external agent's
//! permission request): a terminal by default, or an asker a front end installs, such as an
//! editor speaking ACP to `rawko acp`.

use std::sync::{Arc, RwLock};

/// A question for the user.
#[derive(Debug, Clone)]
pub struct Question {
    /// Who asks (a filter plugin, an agent).
    pub who: String,
    /// What for: the exact command, or the action.
    pub what: String,
    pub reason: String,
}

type Asker = Arc<dyn Fn(&Question) -> bool + Send + Sync>;

static ASKER: RwLock<Option<Asker>> = RwLock::new(None);

/// Put `asker` in charge of questions until the guard is dropped.
pub fn install(asker: impl Fn(&Question) -> bool + Send + Sync + 'static) -> Installed {
    *ASKER.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(asker));
    Installed(())
}

/// While alive, the installed asker answers.
#[derive(Debug)]
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        *ASKER.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The installed asker's answer, or `None` when there is none (ask on a terminal, if any).
pub fn installed(q: &Question) -> Option<bool> {
    let asker = ASKER.read().unwrap_or_else(|e| e.into_inner()).clone();
    asker.map(|a| a(q))
}
