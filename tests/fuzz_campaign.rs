//! Fuzzing of the checkpoint reader and of layer stacks (issue 26): mutated headers and data
//! of `scenarios/tiny-gpt2.safetensors` through `inspect`, `inspect --heads` and `run`, and
//! random stacks of layers through `run`. Every case ends with exit 0, 1 or 2 and, when it
//! fails, exactly one `error:` line; never a panic. Each test stops after a time budget.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;

/// Wall time each fuzz test may spend on its cases.
const BUDGET: Duration = Duration::from_secs(4);

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Runs one case and checks the contract; returns the exit code.
fn check(args: &[&std::ffi::OsStr], what: &str) -> i32 {
    let out = Command::cargo_bin("tokdyn")
        .unwrap()
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        matches!(code, 0..=2),
        "{what}: exit {code} (a hang, a kill or a crash): {err}"
    );
    assert!(
        !err.contains("internal error") && !err.contains("panicked"),
        "{what}: {err}"
    );
    let errors = err.lines().filter(|l| l.starts_with("error:")).count();
    if code != 0 {
        let lines = err.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!((errors, lines), (1, 1), "{what}: {err}");
    }
    code
}

fn tiny() -> Vec<u8> {
    fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tiny-gpt2.safetensors")).unwrap()
}

/// The header (JSON text) and the data of a safetensors file.
fn split(bytes: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (
        String::from_utf8(bytes[8..8 + n].to_vec()).unwrap(),
        bytes[8 + n..].to_vec(),
    )
}

fn join(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// One mutation of the tiny checkpoint.
fn mutate(rng: &mut Rng, original: &[u8]) -> Vec<u8> {
    let (header, data) = split(original);
    match rng.below(8) {
        // Flip bytes anywhere.
        0 => {
            let mut b = original.to_vec();
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            b
        }
        // Truncate.
        1 => original[..rng.below(original.len())].to_vec(),
        // A header word or number replaced.
        2 => {
            let words = [
                (
                    "\"F32\"",
                    *rng.pick(&["\"F64\"", "\"F16\"", "\"I8\"", "\"X\"", "\"BF16\""]),
                ),
                (
                    "[64,192]",
                    *rng.pick(&["[0,0]", "[192,64]", "[64]", "[64,192,1]", "[]"]),
                ),
                (
                    "[64,64]",
                    *rng.pick(&["[0,64]", "[64,0]", "[32,32]", "[4096]"]),
                ),
                ("[128,64]", *rng.pick(&["[0,64]", "[128,0]", "[1,64]"])),
                (
                    "49920",
                    *rng.pick(&["0", "999999999", "49921", "18446744073709551615"]),
                ),
                ("h.1.", *rng.pick(&["h.9.", "h.-1.", "h.1x.", "h.00."])),
            ];
            let (from, to) = words[rng.below(words.len())];
            join(&header.replacen(from, to, 1), &data)
        }
        // Data overwritten with extreme F32 patterns.
        3 => {
            let mut d = data.clone();
            let pattern: f32 =
                *rng.pick(&[f32::NAN, f32::INFINITY, f32::MAX, 1e-45, -f32::MAX, 0.0]);
            let start = rng.below(d.len() / 4) * 4;
            let count = 1 + rng.below(4096);
            for k in 0..count {
                let i = start + 4 * k;
                if i + 4 <= d.len() {
                    d[i..i + 4].copy_from_slice(&pattern.to_le_bytes());
                }
            }
            join(&header, &d)
        }
        // A header length that lies.
        4 => {
            let mut b = original.to_vec();
            let n = *rng.pick(&[0u64, 1, 7, u64::MAX, (b.len() as u64) * 2]);
            b[..8].copy_from_slice(&n.to_le_bytes());
            b
        }
        // The header cut or padded.
        5 => {
            let cut = rng.below(header.len());
            join(&header[..cut], &data)
        }
        // Every tensor zero-sized.
        6 => join(
            &header
                .replace("[64,192]", "[0,0]")
                .replace("[64,64]", "[0,0]")
                .replace("[128,64]", "[0,64]"),
            &data,
        ),
        // All weights scaled to the edge of F32.
        _ => {
            let mut d = data.clone();
            for c in d.chunks_exact_mut(4) {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                c.copy_from_slice(&(v * 1e37).to_le_bytes());
            }
            join(&header, &d)
        }
    }
}

const CHECKPOINT_SCENARIO: &str = r#"
name = "fz"
[model]
kernel = "sa"
beta = 1.0
loop = true
[model.checkpoint]
path = "m.safetensors"
format = "gpt2"
layers = [0, 1]
heads = 4
layer_time = 0.5
[tokens]
init = "embedding"
ids = [5, 17, 42, 3]
center = true
[time]
t_end = 1.0
samples = 5
"#;

#[test]
fn mutated_checkpoints_never_panic_and_fail_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let original = tiny();
    let file = dir.path().join("m.safetensors");
    let scenario = dir.path().join("s.toml");
    fs::write(&scenario, CHECKPOINT_SCENARIO).unwrap();
    let out = dir.path().join("out");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let started = Instant::now();
    let mut cases = 0;
    while started.elapsed() < BUDGET || cases < 8 {
        let bytes = mutate(&mut rng, &original);
        fs::write(&file, &bytes).unwrap();
        let what = format!("case {cases}");
        let _ = check(&["inspect".as_ref(), file.as_os_str()], &what);
        let _ = check(
            &[
                "inspect".as_ref(),
                file.as_os_str(),
                "--heads".as_ref(),
                "4".as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
            &what,
        );
        let _ = check(
            &[
                "run".as_ref(),
                scenario.as_os_str(),
                "--out".as_ref(),
                out.with_extension("run").as_os_str(),
            ],
            &what,
        );
        cases += 1;
    }
    assert!(cases >= 8);
}

/// A random matrix spec for a d x d entry of a layer.
fn matrix(rng: &mut Rng, d: usize) -> String {
    match rng.below(7) {
        0 => "\"identity\"".into(),
        1 => "\"zero\"".into(),
        2 => "\"-identity\"".into(),
        3 => {
            let big = *rng.pick(&["1e300", "-1e300", "1e-300", "0.5", "3", "1e20"]);
            let rows: Vec<String> = (0..d)
                .map(|i| {
                    let row: Vec<String> = (0..d)
                        .map(|j| {
                            if i == j {
                                big.to_string()
                            } else {
                                "0.1".into()
                            }
                        })
                        .collect();
                    format!("[{}]", row.join(", "))
                })
                .collect();
            format!("[{}]", rows.join(", "))
        }
        4 => format!("[[{}]]", vec!["1.0"; d + 1].join(", ")), // wrong shape
        5 => "[]".into(),
        _ => "{ random = \"gaussian\", seed = 3 }".into(),
    }
}

#[test]
fn random_layer_stacks_never_panic_and_fail_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let started = Instant::now();
    let mut cases = 0;
    let mut codes = [0usize; 3];
    while started.elapsed() < BUDGET || cases < 8 {
        let d = 2 + rng.below(3);
        let most = if rng.below(4) == 0 { 3000 } else { 6 };
        let layers = 1 + rng.below(most);
        let looped = rng.below(2) == 0;
        let kernel = *rng.pick(&["lsa", "usa", "sa"]);
        let mut text = format!(
            "name = \"st\"\n[model]\nkernel = \"{kernel}\"\nbeta = {}\nd = {d}\nloop = {looped}\n",
            rng.pick(&["1.0", "0.0", "50.0", "1e300"])
        );
        let a = matrix(&mut rng, d);
        let v = matrix(&mut rng, d);
        for _ in 0..layers {
            let duration = *rng.pick(&["1.0", "0.25", "1e-7", "0", "-1", "1e300", "2"]);
            let (a, v) = if rng.below(3) == 0 {
                (matrix(&mut rng, d), matrix(&mut rng, d))
            } else {
                (a.clone(), v.clone())
            };
            if rng.below(5) == 0 {
                text.push_str(&format!(
                    "[[model.layers]]\nheads = [{{ A = {a}, V = {v} }}, {{ A = {v}, V = {a} }}]\nduration = {duration}\n"
                ));
            } else {
                text.push_str(&format!(
                    "[[model.layers]]\nA = {a}\nV = {v}\nduration = {duration}\n"
                ));
            }
        }
        let t_end = *rng.pick(&["1.0", "3.0", "1e6", "0.5"]);
        let model = *rng.pick(&["full", "group", "oa"]);
        text.push_str(&format!(
            "[tokens]\nn = {}\ninit = \"uniform\"\nseed = 2\n[time]\nt_end = {t_end}\nsamples = 5\n",
            2 + rng.below(12)
        ));
        let path: PathBuf = dir.path().join("stack.toml");
        fs::write(&path, &text).unwrap();
        let out = dir.path().join("o");
        let code = check(
            &[
                "run".as_ref(),
                path.as_os_str(),
                "--model".as_ref(),
                model.as_ref(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
            &format!("case {cases}: {}", &text[..text.len().min(600)]),
        );
        codes[code as usize] += 1;
        cases += 1;
    }
    assert!(cases >= 8, "{codes:?}");
}
