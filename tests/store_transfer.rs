//! `rawko store export` and `rawko store import`: tasks moved between stores as JSON lines, read
//! back the same, and an export that does not fit refused whole.

use crate::support::{Run, Workspace, demo_task, rawko};

fn in_ws(data: &Workspace, ws: &std::path::Path, args: &[&str]) -> Run {
    Run::of(
        rawko(data)
            .arg("--workspace")
            .arg(ws)
            .args(args)
            .output()
            .unwrap(),
    )
}

#[test]
fn an_exported_task_reads_the_same_in_another_store() {
    let data = Workspace::new();
    let demo = demo_task(&data);
    let other = Workspace::new();
    let file = data.path().join("tasks.jsonl");
    let file = file.to_str().unwrap();

    let r = in_ws(&data, &demo.workspace, &["store", "export", "-o", file]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("exported 1 task(s)"), "{r:?}");
    let r = in_ws(&data, other.path(), &["store", "import", file]);
    assert_eq!((r.code, r.stdout.trim()), (0, demo.id.as_str()), "{r:?}");

    let show = |ws: &std::path::Path| {
        let r = in_ws(&data, ws, &["tasks", "show", &demo.id, "--json"]);
        assert_eq!(r.code, 0, "{r:?}");
        r.stdout
    };
    assert_eq!(show(&demo.workspace), show(other.path()));
    let text = in_ws(&data, other.path(), &["tasks", "show", &demo.id]);
    assert!(text.stdout.contains("done"), "{text:?}");

    // A second import of the same task is refused, naming the line, and changes nothing.
    let before = show(other.path());
    let r = in_ws(&data, other.path(), &["store", "import", file]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "tasks.jsonl:2: task {} is already in this store",
            demo.id
        )) && r.stderr.contains("nothing was imported"),
        "{r:?}"
    );
    assert_eq!(show(other.path()), before);

    // Exporting the imported task again gives the same lines: ids and values as they were.
    let again = data.path().join("again.jsonl");
    let r = in_ws(
        &data,
        other.path(),
        &[
            "store",
            "export",
            "--task",
            &demo.id[..4],
            "-o",
            again.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        std::fs::read_to_string(file).unwrap()
    );
}

/// An export someone edited to reach into a task already in the store (a message added to one of
/// its turns), or to carry a column this store does not have, is refused whole.
#[test]
fn an_export_that_does_not_fit_is_refused_whole() {
    let data = Workspace::new();
    let demo = demo_task(&data);
    let r = in_ws(&data, &demo.workspace, &["store", "export"]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    let message = lines
        .iter()
        .find(|l| l.contains("\"table\":\"messages\""))
        .unwrap();
    let before = in_ws(&data, &demo.workspace, &["store", "export"]).stdout;

    for (text, want) in [
        // Only the header and a message of the task already there.
        (
            format!(
                "{}\n{}\n",
                lines[0],
                message.replace("\"id\":", "\"id\":9000")
            ),
            "not a turn this import brings",
        ),
        (
            format!(
                "{}\n{}\n",
                lines[0],
                lines[1].replace("\"prompt\":", "\"shadow\":")
            ),
            "no column `shadow`",
        ),
        (
            "{\"not\":\"an export\"}\n".to_string(),
            "not a rawko export",
        ),
    ] {
        let path = data.path().join("edited.jsonl");
        std::fs::write(&path, text).unwrap();
        let r = in_ws(
            &data,
            &demo.workspace,
            &["store", "import", path.to_str().unwrap()],
        );
        assert_eq!(r.code, 2, "{want}: {r:?}");
        assert!(r.stderr.contains(want), "{want}: {r:?}");
        assert_eq!(
            in_ws(&data, &demo.workspace, &["store", "export"]).stdout,
            before
        );
    }
}
