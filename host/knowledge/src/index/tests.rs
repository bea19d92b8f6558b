//! The index's tests: syncs, refreshes, upgrades and hostile files, and how queries rank.

use super::database::SCHEMA_V1;
use super::*;
use crate::Quiet;

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let w = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        "README.md",
        "# Widgets\nThis project renders widgets.\n\n## Install\nRun the installer script.\n",
    );
    w(
        "src/parse.rs",
        "/// Parse a frobnicator configuration.\nfn parse_config() {}\n\nfn unrelated() {}\n",
    );
    w("src/render.rs", "fn render_widget() { draw(); }\n");
    w("notes.txt", "Meeting notes about the release plan.\n");
    dir
}

fn sync(root: &Path) -> SyncReport {
    let mut index = Index::open(root).unwrap();
    index
        .sync(&KnowledgeConfig::defaults(), None, &mut Quiet)
        .unwrap()
}

#[test]
fn a_query_finds_its_chunk_with_lines() {
    let dir = repo();
    let r = sync(dir.path());
    assert_eq!(r.new, 4);
    let index = Index::open(dir.path()).unwrap();
    let hits = index.query("frobnicator", 5, None).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].path, "src/parse.rs");
    assert_eq!((hits[0].start_line, hits[0].end_line), (1, 4));
    // Stemmed: "installing" finds "installer"? No: porter maps both to "instal".
    let hits = index.query("installing", 5, None).unwrap();
    assert_eq!(hits[0].path, "README.md");
    assert_eq!(hits[0].start_line, 4);
}

#[test]
fn query_syntax_is_never_passed_to_fts5() {
    let dir = repo();
    sync(dir.path());
    let index = Index::open(dir.path()).unwrap();
    for q in [
        "\"unbalanced",
        "widgets AND OR NOT",
        "path:README",
        "NEAR(a b)",
        "w*",
        "render_widget)",
        "col:text ^x",
    ] {
        index
            .query(q, 5, None)
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    assert!(index.query("!!! --- *", 5, None).is_err());
}

#[test]
fn an_unchanged_tree_rewrites_nothing_and_an_edit_only_its_file() {
    let dir = repo();
    sync(dir.path());
    let again = sync(dir.path());
    assert_eq!((again.new, again.changed, again.unchanged), (0, 0, 4));
    assert_eq!(again.chunks_written, 0);
    std::fs::write(dir.path().join("notes.txt"), "Now about lunch.\n").unwrap();
    std::fs::remove_file(dir.path().join("src/render.rs")).unwrap();
    let r = sync(dir.path());
    assert_eq!((r.changed, r.removed, r.unchanged), (1, 1, 2));
    let index = Index::open(dir.path()).unwrap();
    assert!(index.query("release", 5, None).unwrap().is_empty());
    assert_eq!(index.query("lunch", 5, None).unwrap().len(), 1);
    assert!(index.query("draw", 5, None).unwrap().is_empty());
}

#[test]
fn a_hostile_database_is_rebuilt_and_a_symlinked_one_refused() {
    let dir = repo();
    std::fs::create_dir(dir.path().join(".rawko")).unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE chunks(x); CREATE TRIGGER t AFTER INSERT ON chunks BEGIN SELECT 1; END;",
        )
        .unwrap();
    }
    sync(dir.path());
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.status().unwrap().files, 4);
    drop(index);

    let other = tempfile::tempdir().unwrap();
    let dir2 = repo();
    std::fs::create_dir(dir2.path().join(".rawko")).unwrap();
    std::os::unix::fs::symlink(other.path().join("planted.db"), dir2.path().join(DB_FILE)).unwrap();
    let e = Index::open(dir2.path()).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    assert!(!other.path().join("planted.db").exists());
    std::fs::remove_file(dir2.path().join(DB_FILE)).unwrap();
    std::fs::remove_dir(dir2.path().join(".rawko")).unwrap();
    std::os::unix::fs::symlink(other.path(), dir2.path().join(".rawko")).unwrap();
    let e = Index::open(dir2.path()).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
    assert!(std::fs::read_dir(other.path()).unwrap().next().is_none());
}

/// Refresh as if the listing happened `ahead` from now, so that files written by the test
/// count as settled.
fn refresh_ahead(root: &Path) -> SyncReport {
    let mut index = Index::open(root).unwrap();
    let since = fresh::now_ns() + 3_000_000_000;
    index
        .update_since(&KnowledgeConfig::defaults(), &mut Quiet, false, since)
        .unwrap()
}

/// Past one tick of the file system's clock.
fn tick() {
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn a_settled_tree_is_checked_by_stat_alone_and_every_change_is_still_seen() {
    let dir = repo();
    let first = refresh_ahead(dir.path());
    assert!(first.walked);
    assert_eq!(first.new, 4);
    let again = refresh_ahead(dir.path());
    assert!(!again.walked, "nothing moved: no directory is read");
    assert_eq!((again.unchanged, again.changed, again.new), (4, 0, 0));

    // An edit in place that keeps the size: its directory does not move, the file does.
    tick();
    std::fs::write(
        dir.path().join("notes.txt"),
        "Meeting notes about the zebroid plan.\n",
    )
    .unwrap();
    let r = refresh_ahead(dir.path());
    assert!(!r.walked);
    assert_eq!((r.changed, r.unchanged), (1, 3));
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.query("zebroid", 5, None).unwrap().len(), 1);

    // A file in a new nested directory, then one removed: directories moved, so a walk.
    tick();
    std::fs::create_dir_all(dir.path().join("a/b/c")).unwrap();
    std::fs::write(dir.path().join("a/b/c/deep.md"), "# Deep\nokapi\n").unwrap();
    let r = refresh_ahead(dir.path());
    assert!(r.walked);
    assert_eq!(r.new, 1);
    tick();
    std::fs::remove_file(dir.path().join("src/render.rs")).unwrap();
    let r = refresh_ahead(dir.path());
    assert!(r.walked);
    assert_eq!(r.removed, 1);
    assert!(!refresh_ahead(dir.path()).walked);

    // An ignore file edited in place moves only itself, and is watched.
    std::fs::write(dir.path().join(".gitignore"), "nothing\n").unwrap();
    refresh_ahead(dir.path());
    tick();
    std::fs::write(dir.path().join(".gitignore"), "a/\n\n\n\n\n").unwrap();
    let r = refresh_ahead(dir.path());
    assert!(r.walked);
    assert_eq!(r.removed, 1);
    let index = Index::open(dir.path()).unwrap();
    assert!(index.query("okapi", 5, None).unwrap().is_empty());
}

#[test]
fn files_just_written_are_read_again_until_they_settle() {
    let dir = repo();
    sync(dir.path());
    let mut index = Index::open(dir.path()).unwrap();
    // Written moments ago: not trusted by stamp, so read (and found unchanged).
    let r = index
        .refresh(&KnowledgeConfig::defaults(), &mut Quiet)
        .unwrap();
    assert!(r.walked);
    assert_eq!((r.unchanged, r.chunks_written), (4, 0));
    // A binary file is remembered, not read again while its stamp holds.
    std::fs::write(dir.path().join("blob.txt"), b"a\0b").unwrap();
    let r = refresh_ahead(dir.path());
    assert_eq!(r.skipped_binary, 1);
    let r = refresh_ahead(dir.path());
    assert!(!r.walked);
    assert_eq!(r.skipped_binary, 1);
}

#[test]
fn a_version_1_index_is_upgraded_keeping_its_embeddings() {
    let dir = repo();
    std::fs::create_dir(dir.path().join(".rawko")).unwrap();
    let path = dir.path().join(DB_FILE);
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(SCHEMA_V1).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute_batch(
            "INSERT INTO files VALUES ('gone.md', 'h', 1, 'markdown');
                 INSERT INTO chunks(path, start_line, end_line, hash, text) VALUES ('gone.md', 1, 1, 'h', 'ghostword');
                 INSERT INTO embeddings VALUES ('h', 'm', x'0000803f');",
        )
        .unwrap();
    }
    let mut index = Index::open(dir.path()).unwrap();
    let notice = index.notice().unwrap();
    assert!(notice.contains("from format 1 to 2"), "{notice}");
    assert!(notice.contains("embeddings are kept"), "{notice}");
    let r = index
        .sync(&KnowledgeConfig::defaults(), None, &mut Quiet)
        .unwrap();
    assert_eq!(r.new, 4);
    assert!(index.query("ghostword", 5, None).unwrap().is_empty());
    assert_eq!(index.query("frobnicator", 5, None).unwrap().len(), 1);
    let status = index.status().unwrap();
    assert_eq!(status.embeddings, [("m".to_string(), 1)]);
    drop(index);
    assert_eq!(Index::open(dir.path()).unwrap().notice(), None);
}

#[test]
fn chunks_holding_more_of_the_query_rank_first_and_identifiers_split() {
    let dir = tempfile::tempdir().unwrap();
    let w = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        "two.md",
        "# Two\nalpha beta alpha beta alpha beta alpha beta\n",
    );
    w(
        "three.rs",
        "/// alpha, beta and gamma, in a long comment about many other things as well\nfn f() {}\n",
    );
    w("camel.ts", "function gammaDeltaEpsilon() {}\n");
    sync(dir.path());
    let index = Index::open(dir.path()).unwrap();
    let hits = index.query("alpha beta gamma", 5, None).unwrap();
    assert_eq!(hits[0].path, "three.rs");
    assert!(
        hits[0].score >= 3.0 && hits[0].score < 4.0,
        "{}",
        hits[0].score
    );
    assert_eq!(hits[1].path, "two.md");
    assert!(hits[1].score >= 2.0 && hits[1].score < 3.0);
    assert_eq!(index.query("delta", 5, None).unwrap()[0].path, "camel.ts");
    assert_eq!(
        index.query("DeltaEpsilon", 5, None).unwrap()[0].path,
        "camel.ts"
    );
    assert_eq!(
        query_terms("the reconcileLedger \"x\" of"),
        ["(\"reconcileledger\" OR \"reconcile ledger\")", "\"x\""]
    );
}

/// Where enough chunks hold every word, they are found without scoring the others, and
/// the answer is the one the scoring of every chunk gives.
#[test]
fn chunks_holding_every_word_are_found_as_scoring_all_would_find_them() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..40 {
        let text = match i % 4 {
            0 => format!("# N{i}\nalpha beta gamma {}\n", "filler ".repeat(i)),
            1 => format!("# N{i}\nalpha beta alpha beta {}\n", "filler ".repeat(i)),
            2 => format!("# N{i}\ngamma {}\n", "alpha ".repeat(i)),
            _ => format!("# N{i}\nnothing here {i}\n"),
        };
        std::fs::write(dir.path().join(format!("n{i:02}.md")), text).unwrap();
    }
    sync(dir.path());
    let index = Index::open(dir.path()).unwrap();
    let terms = query_terms("alpha beta gamma");
    for limit in [1, 5, 10, 11, 30] {
        let fast = index.bm25(&terms, limit).unwrap();
        let all = index.covered(&terms, limit).unwrap();
        assert_eq!(fast, all, "limit {limit}");
    }
    // Ten chunks hold all three words: asked for more, the rest come by how many they hold.
    let hits = index.bm25(&terms, 30).unwrap();
    assert!(hits[..10].iter().all(|h| h.1 >= 3.0), "{hits:?}");
    assert!(hits[10..].iter().all(|h| h.1 < 3.0), "{hits:?}");
}

struct Letters;
impl Embedder for Letters {
    fn model(&self) -> &str {
        "letters"
    }
    /// A vector of letter counts: texts sharing letters are near.
    fn embed(&mut self, inputs: &[String]) -> Result<Vec<Vec<f32>>, String> {
        Ok(inputs
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 26];
                for c in t.to_ascii_lowercase().bytes() {
                    if c.is_ascii_lowercase() {
                        v[(c - b'a') as usize] += 1.0;
                    }
                }
                v[25] += 0.01;
                v
            })
            .collect())
    }
}

#[test]
fn embeddings_are_cached_by_chunk_and_fused_with_bm25() {
    let dir = repo();
    let mut index = Index::open(dir.path()).unwrap();
    let r = index
        .sync(&KnowledgeConfig::defaults(), Some(&mut Letters), &mut Quiet)
        .unwrap();
    assert!(r.embedded > 0);
    let r = index
        .sync(&KnowledgeConfig::defaults(), Some(&mut Letters), &mut Quiet)
        .unwrap();
    assert_eq!(r.embedded, 0);
    let status = index.status().unwrap();
    assert_eq!(status.embeddings[0].0, "letters");
    let hits = index.query("widgets", 10, Some(&mut Letters)).unwrap();
    // Every chunk has a vector, so the fusion ranks them all; BM25's hit is first.
    assert_eq!(hits.len() as u64, status.chunks);
    assert_eq!(hits[0].path, "README.md");
}
