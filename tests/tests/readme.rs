//! Issue 28 item 1: README's `sh` blocks run as written, in order, against a fresh directory,
//! with `perpsim` on the PATH — so the tour a newcomer follows cannot rot. Then, in the same
//! session, those of every page in `docs/`, in the order README's "Where to read on" lists
//! them (issue 38 item 2): each goes on from the tour, and a page README does not list fails.
//!
//! Each command (a line, with its `\` continuations and any quote left open) runs in one bash
//! session, so variables set by one are there for the next. It must exit 0, unless its
//! comment begins with an HTTP status (`# 400: …`, `# 201, pending`): then `perpsim` must
//! have printed exactly that status, and exit 1 for a status ≥ 400. A block that is one
//! `perpsim serve` line starts that server in the background (stopping the one before) and
//! waits until it listens, as the reader starts it in another shell. `PERPSIM_LISTEN` and
//! `PERPSIM_URL` point serve and the clients at a free port instead of 8080.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The commands of README's `sh` blocks, in order.
fn commands(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if !in_block {
            in_block = line.trim_end() == "```sh";
            continue;
        }
        if line.trim_end() == "```" {
            assert!(
                pending.is_empty(),
                "a command left open at a block's end: {pending}"
            );
            in_block = false;
            continue;
        }
        if pending.is_empty() && line.trim().is_empty() {
            continue;
        }
        pending.push_str(line);
        if open_quote(&pending) || line.ends_with('\\') {
            pending.push('\n');
            continue;
        }
        out.push(std::mem::take(&mut pending));
    }
    out
}

/// Whether `text` ends inside a single-quoted string, as bash reads it: quotes in a comment
/// (a `#` after a blank, outside quotes, to the end of its line) do not count.
fn open_quote(text: &str) -> bool {
    let (mut quoted, mut comment, mut previous) = (false, false, '\n');
    for c in text.chars() {
        match c {
            '\n' => comment = false,
            _ if comment => {}
            '\'' => quoted = !quoted,
            '#' if !quoted && previous.is_whitespace() => comment = true,
            _ => {}
        }
        previous = c;
    }
    quoted
}

/// The HTTP status a command's comment promises, if it begins with one.
fn promised_status(command: &str) -> Option<u16> {
    let (_, comment) = command.rsplit_once("  #")?;
    let digits: String = comment.trim_start().chars().take(3).collect();
    let status: u16 = digits.parse().ok()?;
    (100..600).contains(&status).then_some(status)
}

/// A bash script running every command and checking it; it prints `ran N` at the end.
fn script(commands: &[String], port: u16) -> String {
    let mut s = format!(
        r#"set -u
SERVER=
stop_server() {{ if [ -n "$SERVER" ]; then kill -TERM "$SERVER"; wait "$SERVER"; SERVER=; fi; }}
trap stop_server EXIT
serve_bg() {{
  stop_server
  "$@" > serve.log 2>&1 &
  SERVER=$!
  for _ in $(seq 1 600); do
    (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && return 0
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  echo "the server did not start: $*"; cat serve.log; exit 1
}}
fail() {{
  echo "documented command failed ($1):"; cat cmd.txt
  echo "--- stdout"; cat out.txt; echo "--- stderr"; cat err.txt
  echo "--- server log"; tail -20 serve.log; exit 1
}}
ran=0
"#
    );
    for (i, command) in commands.iter().enumerate() {
        if command.starts_with("perpsim serve") {
            writeln!(s, "serve_bg {command}").unwrap();
            writeln!(s, "ran=$((ran+1))").unwrap();
            continue;
        }
        let delimiter = format!("README_COMMAND_{i}");
        writeln!(s, "cat > cmd.txt <<'{delimiter}'\n{command}\n{delimiter}").unwrap();
        writeln!(s, "{{ {command}\n}} > out.txt 2> err.txt; rc=$?").unwrap();
        match promised_status(command) {
            Some(status) => {
                let rc = u8::from(status >= 400);
                writeln!(
                    s,
                    "grep -qx 'HTTP {status}' err.txt || fail 'not HTTP {status}'\n\
                     [ $rc -eq {rc} ] || fail \"exit $rc\""
                )
                .unwrap();
            }
            None => writeln!(s, "[ $rc -eq 0 ] || fail \"exit $rc\"").unwrap(),
        }
        writeln!(s, "ran=$((ran+1))").unwrap();
    }
    s.push_str("echo \"ran $ran\"\n");
    s
}

/// The pages of `docs/` README links to, in the order it first links them (its images, such
/// as the console's screenshot, are not pages).
fn linked_pages(readme: &str) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    for (at, _) in readme.match_indices("](docs/") {
        let rest = &readme[at + 2..];
        let page = &rest[..rest.find(')').expect("a link's closing parenthesis")];
        if page.ends_with(".md") && !pages.iter().any(|p| p == page) {
            pages.push(page.to_string());
        }
    }
    pages
}

/// README, then every page of `docs/` in README's order; every page must be linked.
fn documents(repo: &Path) -> String {
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let pages = linked_pages(&readme);
    let mut present: Vec<String> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|e| format!("docs/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|name| name.ends_with(".md"))
        .collect();
    present.sort();
    let mut linked = pages.clone();
    linked.sort();
    assert_eq!(
        linked, present,
        "README links every page of docs/, and only those"
    );
    let mut text = readme;
    for page in pages {
        text.push('\n');
        text.push_str(&std::fs::read_to_string(repo.join(&page)).unwrap());
    }
    text
}

#[test]
fn the_readme_and_the_docs_run_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let commands = commands(&documents(&repo));
    assert!(
        commands.len() > 50,
        "the tour's commands: {}",
        commands.len()
    );
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("perpsim serve --clock manual"))
    );
    // An empty directory: what the tour needs, README tells the reader to fetch.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bin = perpsim_tests::binary();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script(&commands, port))
        .current_dir(dir.path())
        .env("PATH", path)
        .env("PERPSIM_LISTEN", format!("127.0.0.1:{port}"))
        .env("PERPSIM_URL", format!("http://127.0.0.1:{port}"))
        .env("PERPSIM_LOG", "warn")
        .env("PERPSIM_AUDIT", "on")
        .env_remove("PERPSIM_DATA_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("ran {}", commands.len()),
        "every command ran"
    );
    // Issue 35: in a clone, nothing the tour leaves is a file git would offer to commit
    // (secrets, data dirs, runs).
    let harness = ["cmd.txt", "out.txt", "err.txt", "serve.log"];
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name();
        if harness.iter().any(|h| name == *h) {
            continue;
        }
        let ignored = Command::new("git")
            .args(["check-ignore", "-q", "--no-index"])
            .arg(&name)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(
            ignored.success(),
            "the tour leaves {name:?}, which .gitignore does not cover"
        );
    }
}

#[test]
fn commands_join_continuations_and_open_quotes_and_read_promised_statuses() {
    let readme = "text\n```sh\na \\\n  b\nc '{\"x\":\n 1}'   # 400: no\n\nd   # it's done\n```\n```\nnot run\n```\n";
    let commands = commands(readme);
    assert_eq!(
        commands,
        [
            "a \\\n  b",
            "c '{\"x\":\n 1}'   # 400: no",
            "d   # it's done"
        ]
    );
    let statuses: Vec<Option<u16>> = commands.iter().map(|c| promised_status(c)).collect();
    assert_eq!(statuses, [None, Some(400), None]);
}

#[test]
fn the_pages_run_in_the_order_readme_first_links_them() {
    let readme = "see [a](docs/b.md), [c](docs/a.md) and [b again](docs/b.md); [x](https://x)";
    assert_eq!(linked_pages(readme), ["docs/b.md", "docs/a.md"]);
}
