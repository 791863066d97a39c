//! The crate's top-level modules form the layers drawn in docs/DESIGN.md ("Layers"): every
//! `crate::<module>` path in a module's files (outside `#[cfg(test)]`, doc comments included)
//! names a module of a strictly lower layer, so the import graph has no cycle and no stage
//! imports a command. The layers are read from the drawing itself, so the picture and the code
//! cannot drift apart.

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
