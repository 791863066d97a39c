//! The crate's top-level modules form the layers drawn in docs/DESIGN.md ("Layers"): every
//! `crate::<module>` path in a module's files (outside `#[cfg(test)]`, doc comments included)
//! names a module of a strictly lower layer, so the import graph has no cycle and no stage
//! imports a command. The layers are read from the drawing itself, so the picture and the code
//! cannot drift apart. Inside each folder of `src/` the files import each other without a
//! circle either (`super::x` and `crate::<folder>::x` paths, items re-exported by `mod.rs`
//! resolved to the file that defines them).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The modules named by `crate::` paths in `text`: `crate::a::b` gives `a`, and each item of a
/// group `crate::{a::x, b, c::{y, z}}` gives its first segment.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            for item in top_level_items(&group[..end]) {
                found.insert(leading_name(item));
            }
        } else {
            found.insert(leading_name(rest));
        }
    }
    found.retain(|name| !name.is_empty() && name != "self");
    found
}

/// The comma-separated items of a `{...}` group at its own depth.
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// The identifier at the start of `path` (after white space).
fn leading_name(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every top-level module of `src` (a file `m.rs` or a folder `m/`) and the modules its files
/// name, read outside `#[cfg(test)]`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        let mut names = BTreeSet::new();
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            names.extend(crate_paths(code));
        }
        names.remove(&name);
        graph.insert(name, names);
    }
    graph
}

fn rust_files(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The layer of each module, from the drawing in docs/DESIGN.md: the fenced block after the
/// line `<!-- layers -->`, one line a layer, `N  module module ...  -- what they hold`.
fn drawn_layers(design: &str) -> BTreeMap<String, u32> {
    let after = design
        .split("<!-- layers -->")
        .nth(1)
        .expect("docs/DESIGN.md has a `<!-- layers -->` drawing");
    let block = after.split("```").nth(1).expect("a fenced block follows");
    let mut layers = BTreeMap::new();
    for line in block.lines().skip(1) {
        let modules = line.split("--").next().unwrap_or("");
        let mut words = modules.split_whitespace();
        let Some(Ok(layer)) = words.next().map(str::parse::<u32>) else {
            continue;
        };
        for module in words {
            assert!(
                layers.insert(module.to_string(), layer).is_none(),
                "{module} is drawn twice"
            );
        }
    }
    layers
}

/// The imports that do not point to a strictly lower layer, as `from -> to` lines.
fn upward_edges(
    graph: &BTreeMap<String, BTreeSet<String>>,
    layers: &BTreeMap<String, u32>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, names) in graph {
        for to in names.iter().filter(|n| graph.contains_key(*n)) {
            if layers[to] >= layers[from] {
                wrong.push(format!(
                    "{from} (layer {}) -> {to} (layer {})",
                    layers[from], layers[to]
                ));
            }
        }
    }
    wrong
}

#[test]
fn every_import_points_down_the_drawn_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = module_graph(&root.join("src"));
    let layers = drawn_layers(&fs::read_to_string(root.join("docs/DESIGN.md")).unwrap());
    let modules: BTreeSet<&String> = graph.keys().collect();
    let drawn: BTreeSet<&String> = layers.keys().collect();
    assert_eq!(
        modules, drawn,
        "the drawing names exactly the modules of src/"
    );
    let wrong = upward_edges(&graph, &layers);
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_finds_every_kind_of_path() {
    let text =
        "use crate::a::X;\nuse crate::{b::{c, d}, e, self};\n/// [`crate::f`] and crate::g::{h}";
    let found: Vec<String> = crate_paths(text).into_iter().collect();
    assert_eq!(found, ["a", "b", "e", "f", "g"]);
}

#[test]
fn an_upward_import_is_reported() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("low".to_string(), BTreeSet::from(["high".to_string()])),
        ("high".to_string(), BTreeSet::from(["low".to_string()])),
    ]
    .into();
    let layers =
        drawn_layers("<!-- layers -->\n```text\n1  high  -- top\n0  low  -- bottom\n```\n");
    assert_eq!(
        upward_edges(&graph, &layers),
        ["low (layer 0) -> high (layer 1)"]
    );
}

/// The names a file's code reaches in its own folder: `super::x` and `crate::<folder>::x`
/// paths (each item of a `{...}` group), read outside `#[cfg(test)]`.
fn folder_paths(text: &str, folder: &str) -> BTreeSet<String> {
    // `super::super::x` leaves the folder.
    let code = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .replace("super::super::", "outside::");
    let own = format!("crate::{folder}::");
    let mut found = BTreeSet::new();
    for prefix in ["super::", own.as_str()] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in top_level_items(&group[..end]) {
                    found.insert(leading_name(item));
                }
            } else {
                found.insert(leading_name(rest));
            }
        }
    }
    found.retain(|name| !name.is_empty() && name != "self");
    found
}

/// The items `mod.rs` re-exports from its files (`pub use x::Item;`, `pub use x::{A, B};`):
/// item -> file.
fn reexports(mod_rs: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in mod_rs.split(';') {
        let line = line.trim();
        let Some(at) = line.find("use ") else {
            continue;
        };
        if !line[..at].trim_start().starts_with("pub") {
            continue;
        }
        let path = line[at + 4..].trim().trim_start_matches("self::");
        let Some((file, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in top_level_items(items) {
            let name = leading_name(item);
            if !name.is_empty() {
                map.insert(name, file.trim().to_string());
            }
        }
    }
    map
}

/// The import graph among the files of one folder (mod.rs left out: it declares the files).
fn folder_graph(
    files: &BTreeMap<String, String>,
    folder: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    let exported = files.get("mod").map(|m| reexports(m)).unwrap_or_default();
    let mut graph = BTreeMap::new();
    for (name, text) in files.iter().filter(|(n, _)| n.as_str() != "mod") {
        let targets = folder_paths(text, folder)
            .into_iter()
            .filter_map(|n| {
                if files.contains_key(&n) {
                    Some(n)
                } else {
                    exported.get(&n).cloned()
                }
            })
            .filter(|t| t != name && t != "mod")
            .collect();
        graph.insert(name.clone(), targets);
    }
    graph
}

/// One circle of a graph, if it has one (as `a -> b -> a`).
fn a_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node);
            return Some(circle.join(" -> "));
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|start| visit(start, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_has_an_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut circles = Vec::new();
    for entry in fs::read_dir(&src).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
        let files: BTreeMap<String, String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .map(|p| {
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                (name, fs::read_to_string(&p).unwrap())
            })
            .collect();
        if let Some(c) = a_circle(&folder_graph(&files, &folder)) {
            circles.push(format!("{folder}: {c}"));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles inside folders:\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_folder_circle_through_a_reexport_is_found() {
    let files: BTreeMap<String, String> = [
        ("mod", "mod a;\nmod b;\npub use b::{Thing, Other};\n"),
        ("a", "use super::Thing;\n"),
        ("b", "use crate::f::a::helper;\n#[cfg(test)]\nuse super::c;"),
        ("c", "use super::super::a;"),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    let graph = folder_graph(&files, "f");
    assert_eq!(graph["a"], BTreeSet::from(["b".to_string()]));
    assert_eq!(graph["b"], BTreeSet::from(["a".to_string()]));
    assert!(graph["c"].is_empty());
    assert_eq!(a_circle(&graph).as_deref(), Some("a -> b -> a"));
    let mut broken = graph.clone();
    broken.insert("b".into(), BTreeSet::new());
    assert_eq!(a_circle(&broken), None);
}
