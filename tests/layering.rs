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
