//! The crate edges of the workspace against the crate table of `docs/ARCHITECTURE.md`: reads
//! `cargo metadata --no-deps` (no build, no network) and fails on a workspace-internal
//! dependency the table's "may depend on" column does not allow, and on a workspace crate the
//! table does not list. The table is the only list of allowed edges, so the doc and this test
//! cannot drift.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::workspace_root;

/// One row of the crate table: the crate's folder and the folders it may depend on.
struct Row {
    folder: String,
    may_depend_on: Vec<String>,
}

/// The cells of a markdown table row, trimmed, without the outer pipes.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

/// `` `model/` `` → `model`; ` model` → `model`.
fn folder_name(cell: &str) -> String {
    cell.trim()
        .trim_matches('`')
        .trim_end_matches('/')
        .to_owned()
}

/// The rows (crate name → row) of the table in `doc` whose header has a "crate" and a
/// "depend on" column; rows whose crate is `—` (folders that are no crate) are left out.
fn crate_table(doc: &str) -> Result<BTreeMap<String, Row>, String> {
    let mut lines = doc.lines().map(str::trim).skip_while(|l| {
        !(l.starts_with('|') && l.contains("| crate |") && l.contains("depend on"))
    });
    let header = cells(
        lines
            .next()
            .ok_or("no table with a \"crate\" and a \"depend on\" column")?,
    );
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.contains(name))
            .ok_or(format!("no {name:?} column in {header:?}"))
    };
    let (folder_col, crate_col, deps_col) = (col("folder")?, col("crate")?, col("depend on")?);
    let mut rows = BTreeMap::new();
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let c = cells(line);
        let get = |i: usize| c.get(i).ok_or(format!("short row: {line}"));
        let name = get(crate_col)?.trim_matches('`').to_owned();
        if name == "—" {
            continue;
        }
        let deps = get(deps_col)?;
        let may_depend_on = if deps == "—" {
            Vec::new()
        } else {
            deps.split(',').map(folder_name).collect()
        };
        let row = Row {
            folder: folder_name(get(folder_col)?),
            may_depend_on,
        };
        rows.insert(name, row);
    }
    Ok(rows)
}

/// `cargo metadata --format-version 1 --no-deps` of the workspace, with the `cargo` running
/// this test (`CARGO`), offline: it reads the manifests only.
fn metadata(root: &Path) -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// A workspace package: its folder (relative to the root) and its workspace-internal
/// dependencies as (name, kind) with kind `normal`, `dev` or `build`.
struct Package {
    folder: String,
    deps: Vec<(String, String)>,
}

fn packages(meta: &Value, root: &Path) -> BTreeMap<String, Package> {
    let all = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = all.iter().filter_map(|p| p["name"].as_str()).collect();
    all.iter()
        .map(|p| {
            let manifest = Path::new(p["manifest_path"].as_str().expect("manifest_path"));
            let dir = manifest.parent().expect("manifest in a folder");
            let folder = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter_map(|d| {
                    let name = d["name"].as_str()?;
                    let kind = d["kind"].as_str().unwrap_or("normal");
                    names
                        .contains(name)
                        .then(|| (name.to_owned(), kind.to_owned()))
                })
                .collect();
            let name = p["name"].as_str().expect("name").to_owned();
            (name, Package { folder, deps })
        })
        .collect()
}

/// Whether `from` reaches `to` through normal and build dependencies.
fn reaches(packages: &BTreeMap<String, Package>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(p) = stack.pop() {
        if p == to {
            return true;
        }
        if !seen.insert(p) {
            continue;
        }
        let deps = packages
            .get(p)
            .map(|p| p.deps.as_slice())
            .unwrap_or_default();
        stack.extend(
            deps.iter()
                .filter(|(_, k)| k != "dev")
                .map(|(n, _)| n.as_str()),
        );
    }
    false
}

/// Every workspace-internal edge against the table. Normal and build dependencies must be in
/// the crate's "may depend on" column. Dev-dependencies (tests, benches, examples) are not in
/// the table: they may reach any workspace crate that does not itself depend, directly or not,
/// on the crate, so a test may use a crate beside or below its own but never one above it.
#[test]
fn crate_edges_are_the_ones_architecture_md_allows() {
    let root = workspace_root().canonicalize().expect("the workspace root");
    let doc_path = root.join("docs/ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&doc_path).expect("read docs/ARCHITECTURE.md");
    let table = crate_table(&doc).unwrap_or_else(|e| panic!("docs/ARCHITECTURE.md: {e}"));
    let packages = packages(&metadata(&root), &root);
    let crate_of_folder: BTreeMap<&str, &str> = table
        .iter()
        .map(|(name, row)| (row.folder.as_str(), name.as_str()))
        .collect();

    let mut wrong = Vec::new();
    for (name, row) in &table {
        for f in &row.may_depend_on {
            if !crate_of_folder.contains_key(f.as_str()) {
                wrong.push(format!(
                    "{name}: \"may depend on\" names {f:?}, no crate of the table"
                ));
            }
        }
    }
    for (name, p) in &packages {
        let Some(row) = table.get(name) else {
            wrong.push(format!(
                "{name} (folder {}) is not in the crate table",
                p.folder
            ));
            continue;
        };
        if row.folder != p.folder {
            wrong.push(format!(
                "{name} is in folder {}, the table says {}",
                p.folder, row.folder
            ));
        }
        let allowed: BTreeSet<&str> = row
            .may_depend_on
            .iter()
            .filter_map(|f| crate_of_folder.get(f.as_str()).copied())
            .collect();
        for (dep, kind) in &p.deps {
            let ok = if kind == "dev" {
                !reaches(&packages, dep, name)
            } else {
                allowed.contains(dep.as_str())
            };
            if !ok {
                let why = if kind == "dev" {
                    format!("{dep} depends on {name}: a test may not use a crate above its own")
                } else {
                    format!(
                        "{} may depend on: {}",
                        row.folder,
                        row.may_depend_on.join(", ")
                    )
                };
                wrong.push(format!("{name} → {dep} ({kind}): not allowed ({why})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "crate edges against the table of {}:\n  {}",
        doc_path.display(),
        wrong.join("\n  ")
    );
}

#[test]
fn the_table_parser_reads_folders_crates_and_edges() {
    let doc = "x\n\n| folder | crate | owns | may depend on |\n|---|---|---|---|\n\
               | `model/` | dyeline-model | words | — |\n\
               | `store/` | dyeline-store | files | model |\n\
               | `queries/` | dyeline-queries | reads | model, `store/` |\n\
               | `tests/` | — | e2e | server |\n\nafter\n";
    let t = crate_table(doc).expect("a table");
    let names = ["dyeline-model", "dyeline-queries", "dyeline-store"];
    assert_eq!(t.keys().collect::<Vec<_>>(), names);
    assert_eq!(t["dyeline-model"].folder, "model");
    assert!(t["dyeline-model"].may_depend_on.is_empty());
    assert_eq!(t["dyeline-store"].may_depend_on, ["model"]);
    assert_eq!(t["dyeline-queries"].may_depend_on, ["model", "store"]);
    assert!(crate_table("no table here").is_err());
}
