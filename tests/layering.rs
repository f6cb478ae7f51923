//! The memory_management layer knows no wgpu: it is generic over a storage, and its tests
//! and benches run on host memory. This test fails when wgpu appears in its code.

use std::path::Path;

fn visit(dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        panic!("cannot read {}", dir.display());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            visit(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains("wgpu::") || code.contains("use wgpu") {
                    found.push(format!(
                        "{}:{}: {}",
                        path.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
}

#[test]
fn memory_management_does_not_use_wgpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/memory_management");
    let mut found = Vec::new();
    visit(&root, &mut found);
    assert!(
        found.is_empty(),
        "wgpu in the memory_management layer:\n{}",
        found.join("\n")
    );
}

/// The check itself sees a use of wgpu.
#[test]
fn the_check_finds_a_use_of_wgpu() {
    let dir = std::env::temp_dir().join(format!("wgpu-memory-layering-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.rs"),
        "use wgpu::Buffer;\n// wgpu:: in a comment is fine\n",
    )
    .unwrap();
    let mut found = Vec::new();
    visit(&dir, &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Lines of the `.rs` files under `dir` that contain `needle` outside comments.
fn uses_of(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(uses_of(&path, needle));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains(needle) {
                    found.push(format!(
                        "{}:{}: {}",
                        path.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    found
}

/// The server layer sits below the client: it never names the client's module (the
/// types the client hands out are defined in the server and re-exported above it).
#[test]
fn the_server_does_not_import_the_client() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server");
    let found = uses_of(&root, "crate::client");
    assert!(
        found.is_empty(),
        "the server imports the client:\n{}",
        found.join("\n")
    );
}

/// The poller is generic: it knows nothing of readbacks, so readback -> poller is the
/// only direction between them.
#[test]
fn the_poller_does_not_import_the_readback() {
    let poller = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server/reads/poller.rs");
    let text = std::fs::read_to_string(poller).unwrap();
    assert!(
        !text.contains("readback::"),
        "the poller imports the readback"
    );
}

/// Each layer calls only the layers below it: storage < memory_management < report <
/// server < client. Code naming a layer above its own is a failure.
#[test]
fn no_layer_names_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = ["storage", "memory_management", "report", "server", "client"];
    let mut found = Vec::new();
    for (at, layer) in layers.iter().enumerate() {
        for above in &layers[at + 1..] {
            found.extend(uses_of(&src.join(layer), &format!("crate::{above}")));
        }
    }
    assert!(
        found.is_empty(),
        "a layer names one above it:\n{}",
        found.join("\n")
    );
}
