//! The user's consent to each MCP server: given once for a server as it is (its command line
//! or URL) and the tools it lists; anything changed asks again. Kept in the user's data
//! directory, never in a workspace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file, in the data directory.
pub const FILE: &str = "mcp-consent.json";

/// Consents given, by server name: the fingerprint consented to.
#[derive(Debug, Default)]
pub struct Consents {
    path: PathBuf,
    given: BTreeMap<String, String>,
}

impl Consents {
    /// Read the consents under `data_dir` (none yet is no error; an unreadable file is).
    pub fn load(data_dir: &Path) -> Result<Consents, String> {
        let path = data_dir.join(FILE);
        let given = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("{}: {e} (remove it to be asked again)", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Ok(Consents { path, given })
    }

    /// Whether the user consented to `server` as it is now (`fingerprint`).
    pub fn given(&self, server: &str, fingerprint: &str) -> bool {
        self.given.get(server).is_some_and(|f| f == fingerprint)
    }

    /// Whether consent was given once to something else under this name: the server or its
    /// tools changed since.
    pub fn changed(&self, server: &str, fingerprint: &str) -> bool {
        self.given.get(server).is_some_and(|f| f != fingerprint)
    }

    /// Record consent to `server` as it is now, and save (atomically: a write beside, renamed).
    pub fn give(&mut self, server: &str, fingerprint: &str) -> Result<(), String> {
        self.given
            .insert(server.to_string(), fingerprint.to_string());
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.given).expect("a map of strings");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consent_holds_for_the_same_fingerprint_only_and_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Consents::load(dir.path()).unwrap();
        assert!(!c.given("s", "f1") && !c.changed("s", "f1"));
        c.give("s", "f1").unwrap();
        let c = Consents::load(dir.path()).unwrap();
        assert!(c.given("s", "f1"));
        assert!(!c.given("s", "f2") && c.changed("s", "f2"));
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert!(
            Consents::load(dir.path())
                .unwrap_err()
                .contains("remove it")
        );
    }
}
