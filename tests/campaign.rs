//! The third reliability campaign (issue 26): memory bounds, work that cannot finish,
//! checkpoint validation, `inspect --out`, extreme sweep axes and the small messages. Each
//! test names the item of the campaign it covers.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;

fn tokdyn() -> Command {
    let mut c = Command::cargo_bin("tokdyn").unwrap();
    c.env_remove("SLURM_ARRAY_TASK_ID")
        .env("RAYON_NUM_THREADS", "1");
    c
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

/// Runs `cmd`, which must end with `code` within `limit`; returns the single stderr line
/// (which starts `error:`), or "" on success.
fn ends_with(cmd: &mut Command, code: i32, limit: Duration) -> String {
    let started = Instant::now();
    let out = cmd.timeout(limit * 4).output().unwrap();
    let elapsed = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(elapsed < limit, "took {elapsed:?}: {err}");
    if code == 0 {
        return String::new();
    }
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("error:"), "{err}");
    lines[0].to_string()
}

fn refused(cmd: &mut Command) -> String {
    ends_with(cmd, 2, Duration::from_secs(30))
}

/// A `.safetensors` file from (name, dtype, shape, raw little-endian data).
fn safetensors(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let text = serde_json::to_string(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&data);
    out
}

/// A gpt2-layout checkpoint of d = 4 (2 heads possible) whose weights are all `w` (F64), with
/// an embedding of 8 rows.
fn gpt2_f64(w: f64) -> Vec<u8> {
    let bytes = |count: usize, x: f64| -> Vec<u8> {
        (0..count)
            .flat_map(|i| (x * (1.0 + 0.01 * i as f64)).to_le_bytes())
            .collect()
    };
    safetensors(&[
        ("h.0.attn.c_attn.weight", "F64", vec![4, 12], bytes(48, w)),
        ("h.0.attn.c_proj.weight", "F64", vec![4, 4], bytes(16, w)),
        ("wte.weight", "F64", vec![8, 4], bytes(32, 0.1)),
    ])
}

fn checkpoint_scenario(file: &str, extra_model: &str, layers: &str, t_end: f64) -> String {
    format!(
        r#"
name = "c"
[model]
kernel = "sa"
beta = 1.0
{extra_model}
[model.checkpoint]
path = "{file}"
format = "gpt2"
layers = {layers}
heads = 2
[tokens]
init = "embedding"
ids = [0, 1, 2, 3, 4]
[time]
t_end = {t_end}
samples = 11
"#
    )
}

/// Item 1: identical layer entries and repeated checkpoint layers share one copy of their
/// matrices (and one field), and a stack that cannot fit is refused before it is built.
#[test]
fn layers_share_their_matrices_and_a_stack_that_cannot_fit_is_refused_before_allocating() {
    use std::sync::Arc;
    let mut text =
        String::from("name = \"s\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 8\nloop = true\n");
    for i in 0..300 {
        let v = if i % 3 == 2 { "zero" } else { "identity" };
        text.push_str(&format!(
            "[[model.layers]]\nA = \"identity\"\nV = \"{v}\"\nduration = {}\n",
            1.0 + (i % 2) as f64
        ));
    }
    text.push_str(
        "[tokens]\nn = 16\ninit = \"uniform\"\nseed = 1\n[time]\nt_end = 2.0\nsamples = 5\n",
    );
    let table: toml::Table = text.parse().unwrap();
    let s =
        tokdyn::scenario::Scenario::from_table(table, Path::new("s.toml"), Path::new("")).unwrap();
    let layers = &s.model.layers;
    assert_eq!(layers.len(), 300);
    for (i, l) in layers.iter().enumerate() {
        let first = if i % 3 == 2 { 2 } else { 0 };
        assert!(Arc::ptr_eq(&l.heads, &layers[first].heads), "layer {i}");
    }
    assert!(!Arc::ptr_eq(&layers[0].heads, &layers[2].heads));
    // The durations stay each layer's own.
    assert_eq!((layers[0].duration, layers[1].duration), (1.0, 2.0));
    let sim = tokdyn::simulation::build(&s, tokdyn::scenario::ModelKind::Full).unwrap();
    let stack = tokdyn::integrate::Dynamics::piecewise(sim.dynamics.as_ref()).unwrap();
    assert_eq!((stack.len(), stack.distinct_layers()), (300, 2));

    // The resolved scenario writes exact identity and zero matrices as words.
    let resolved = &s.resolved["model"]["layers"];
    assert_eq!(resolved[0]["heads"][0]["A"].as_str(), Some("identity"));
    assert_eq!(resolved[2]["heads"][0]["V"].as_str(), Some("zero"));
    // 2 * 10^5 entries of d = 64 with a random V: the resolved scenario alone would take
    // hundreds of GB.
    let dir = tempfile::tempdir().unwrap();
    let mut big = String::from(
        "name = \"big\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 64\nloop = true\n",
    );
    for _ in 0..200_000 {
        big.push_str(
            "[[model.layers]]\nA = \"identity\"\nV = { random = \"gaussian\", seed = 1 }\n",
        );
    }
    big.push_str(
        "[tokens]\nn = 64\ninit = \"uniform\"\nseed = 1\n[time]\nt_end = 2.0\nsamples = 5\n",
    );
    let path = write(dir.path(), "big.toml", big);
    let e = ends_with(
        tokdyn()
            .arg("run")
            .arg(&path)
            .arg("--out")
            .arg(dir.path().join("o")),
        2,
        Duration::from_secs(20),
    );
    assert!(
        e.contains("model.layers") && e.contains("200000 layers (1 distinct)") && e.contains("GB"),
        "{e}"
    );
    assert!(!dir.path().join("o").exists());

    // 10^4 checkpoint layer indices read two layers once each.
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tiny-gpt2.safetensors");
    let indices: Vec<String> = (0..10_000).map(|i| (i % 2).to_string()).collect();
    let text = format!(
        "name = \"c\"\n[model]\nkernel = \"sa\"\nbeta = 1.0\n[model.checkpoint]\npath = \"{}\"\nformat = \"gpt2\"\nlayers = [{}]\nheads = 4\n[tokens]\ninit = \"embedding\"\nids = [1, 2, 3]\n[time]\nt_end = 1.0\nsamples = 3\n",
        tiny.display(),
        indices.join(", ")
    );
    let s = tokdyn::scenario::Scenario::from_table(
        text.parse().unwrap(),
        Path::new("c.toml"),
        Path::new(""),
    )
    .unwrap();
    let layers = &s.model.layers;
    assert_eq!(layers.len(), 10_000);
    assert!(layers
        .iter()
        .enumerate()
        .all(|(i, l)| Arc::ptr_eq(&l.heads, &layers[i % 2].heads)));
}

fn sweep_files(dir: &Path, axis: &str) -> PathBuf {
    write(
        dir,
        "base.toml",
        "name = \"b\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 2\nA = \"identity\"\nV = [[\"v11\", 0.5], [-0.5, \"-v11\"]]\n[params]\nv11 = 0.2\n[tokens]\nn = 16\ninit = \"poisson\"\nseed = 1\nr0 = 0.3\n[time]\nt_end = 2.0\nsamples = 11\n",
    );
    write(
        dir,
        "sweep.toml",
        format!("name = \"sw\"\nscenario = \"base.toml\"\nmodel = \"oa\"\n[axes]\n{axis}\n"),
    )
}

/// Item 2: extreme axes draw in bounded time; a grid point that overflows is refused with
/// the axis key before any point runs.
#[test]
fn extreme_sweep_axes_draw_in_bounded_time_and_overflowing_grid_points_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = sweep_files(
        dir.path(),
        r#""model.beta" = { from = -1e308, to = 1e308, steps = 2 }"#,
    );
    // beta |A| = 1e308 overflows the scores' arithmetic: refused up front at the axis (issue
    // 42), where it used to start and fail point by point.
    let out = dir.path().join("o");
    let e = refused(tokdyn().arg("sweep").arg(&sweep).arg("--out").arg(&out));
    assert!(
        e.contains("axes.model.beta") && e.contains("overflows"),
        "{e}"
    );
    assert!(!out.join("sweep.csv").exists());
    let sweep = sweep_files(dir.path(), "v11 = { from = -1e308, to = 1e308, steps = 3 }");
    let e = refused(
        tokdyn()
            .arg("sweep")
            .arg(&sweep)
            .arg("--out")
            .arg(dir.path().join("p")),
    );
    assert!(
        e.contains("axes.v11") && e.contains("grid point 1 of 3"),
        "{e}"
    );
    assert!(!dir.path().join("p").join("sweep.csv").exists());
}

/// Items 3 and 5: work that cannot finish is refused up front with the key and the count.
#[test]
fn runs_that_cannot_finish_are_refused_with_the_key_and_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let base = |extra: &str, time: &str| {
        format!(
            "name = \"x\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 2\n{extra}\n[tokens]\nn = 8\ninit = \"poisson\"\nseed = 1\nr0 = 0.3\n[time]\n{time}\n"
        )
    };
    let rk4 = base(
        "A = \"identity\"\nV = \"identity\"\n[solver]\nmethod = \"rk4\"\ndt = 1e-300",
        "t_end = 1.0\nsamples = 5",
    );
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "rk4.toml", rk4)));
    assert!(
        e.contains("solver.dt") && e.contains("1.00e300 steps"),
        "{e}"
    );
    for (duration, count) in [
        ("1e-5", "1.00e8"),
        ("1e-12", "1.00e15"),
        ("1e-300", "1.00e303"),
    ] {
        let text = base(
            &format!("loop = true\n[[model.layers]]\nA = \"identity\"\nV = \"identity\"\nduration = {duration}"),
            "t_end = 1000.0\nsamples = 5",
        );
        let e = refused(
            tokdyn()
                .arg("run")
                .arg(write(dir.path(), "loop.toml", text))
                .args(["--model", "oa"]),
        );
        assert!(
            e.contains("model.layers[0].duration")
                && e.contains(&format!("{count} layer boundaries")),
            "{e}"
        );
    }
    // A bound that is met runs: 10^3 passes of one layer.
    let text = base(
        "loop = true\n[[model.layers]]\nA = \"identity\"\nV = \"identity\"\nduration = 0.01",
        "t_end = 10.0\nsamples = 5",
    );
    let _ = ends_with(
        tokdyn()
            .arg("run")
            .arg(write(dir.path(), "ok.toml", text))
            .args(["--model", "oa", "--out"])
            .arg(dir.path().join("ok")),
        0,
        Duration::from_secs(30),
    );
    // A checkpoint layer time of 1e-300 in a loop.
    write(dir.path(), "w.safetensors", gpt2_f64(0.1));
    let text = checkpoint_scenario("w.safetensors", "loop = true", "[0]", 10.0)
        .replace("heads = 2\n", "heads = 2\nlayer_time = 1e-300\n");
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "lt.toml", text)));
    assert!(e.contains("model.checkpoint.layer_time"), "{e}");
}

/// The speed bound knows positions and normalisations: lsa's weights grow by ALiBi's m |i - j|
/// (n = 8: S = |V| (beta |A| + 7 m)), nGPT moves at most at alpha, peri-LN at 1 whatever V.
#[test]
fn positions_and_normalisations_enter_the_speed_bound() {
    let dir = tempfile::tempdir().unwrap();
    let text = |kernel: &str, model: &str, t_end: f64| {
        format!(
            "name = \"x\"\n[model]\nkernel = \"{kernel}\"\nbeta = 1.0\nd = 2\nA = \"identity\"\n{model}\n[tokens]\nn = 8\ninit = \"uniform\"\nseed = 1\n[time]\nt_end = {t_end:e}\nsamples = 5\n"
        )
    };
    // Slopes of 1e6: 7e6 per unit time; 1e6 of time is past the work bound (1e12 radians);
    // slopes of 1e300 overflow the arithmetic (1e150).
    let cases = [
        (
            "lsa",
            "V = \"identity\"\nposition = { alibi = { slopes = [1e300] } }",
            1.0,
            "model.position",
            "ALiBi",
        ),
        (
            "lsa",
            "V = \"identity\"\nposition = { alibi = { slope_per_n = 1e300 } }",
            1.0,
            "model.position",
            "ALiBi",
        ),
        (
            "lsa",
            "V = \"identity\"\nposition = { alibi = { slopes = [1e6] } }",
            1e6,
            "time.t_end",
            "7.00e12",
        ),
        (
            "sa",
            "V = \"identity\"\nnormalization = \"ngpt\"\nngpt_alpha = 1e300",
            1.0,
            "model.ngpt_alpha",
            "alpha",
        ),
        (
            "sa",
            "V = \"identity\"\nnormalization = \"ngpt\"\nngpt_alpha = 1e9",
            1e4,
            "time.t_end",
            "1.00e13",
        ),
    ];
    for (kernel, model, t_end, key, word) in cases {
        let e = refused(tokdyn().arg("run").arg(write(
            dir.path(),
            "s.toml",
            text(kernel, model, t_end),
        )));
        assert!(e.contains(key) && e.contains(word), "{model}: {e}");
    }
    // usa's and sa's weights do not grow with ALiBi, and peri-LN moves at speed 1 whatever V:
    // runs that the lsa-like or the plain bound would refuse (7e6 x 1e6, 1e12 x 1e4 radians)
    // are accepted (and end: with these slopes each token attends to itself alone).
    let fine = [
        (
            "usa",
            "V = \"identity\"\nposition = { alibi = { slopes = [1e6] } }",
            1e6,
        ),
        (
            "sa",
            "V = [[1e12, 0], [0, 1e12]]\nnormalization = \"peri\"",
            1e4,
        ),
    ];
    for (i, (kernel, model, t_end)) in fine.into_iter().enumerate() {
        let path = write(dir.path(), "f.toml", text(kernel, model, t_end));
        let _ = ends_with(
            tokdyn()
                .arg("run")
                .arg(path)
                .arg("--out")
                .arg(dir.path().join(format!("f{i}"))),
            0,
            Duration::from_secs(60),
        );
    }
}

/// Item 4: zero-sized tensors are refused with their name, never a panic.
#[test]
fn zero_sized_checkpoint_tensors_are_refused_with_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "empty.safetensors",
        safetensors(&[
            ("h.0.attn.c_attn.weight", "F32", vec![0, 0], vec![]),
            ("h.0.attn.c_proj.weight", "F32", vec![0, 0], vec![]),
        ]),
    );
    for heads in [None, Some("1")] {
        let mut cmd = tokdyn();
        cmd.arg("inspect").arg(&file);
        if let Some(h) = heads {
            cmd.args(["--heads", h, "--out"]).arg(dir.path().join("i"));
        }
        let e = refused(&mut cmd);
        assert!(
            e.contains("h.0.attn.c_attn.weight") && e.contains("empty"),
            "{e}"
        );
    }
    let text = checkpoint_scenario("empty.safetensors", "", "[0]", 1.0);
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "e.toml", text)));
    assert!(
        e.contains("h.0.attn.c_attn.weight") && e.contains("empty"),
        "{e}"
    );
}

/// Items 5 and 7: heads that overflow once formed in f64 (weights of 1e200 in F64, or the
/// largest F32 values) are refused with the tensor's name, by inspect and run alike.
#[test]
fn overflowing_heads_are_refused_with_the_tensor_name_in_inspect_and_run() {
    let dir = tempfile::tempdir().unwrap();
    for (name, weight) in [("huge", 1e200), ("f32max", 3.4e38), ("nan-free", 1e70)] {
        let file = format!("{name}.safetensors");
        let path = write(dir.path(), &file, gpt2_f64(weight));
        let e = refused(
            tokdyn()
                .arg("inspect")
                .arg(&path)
                .args(["--heads", "2", "--out"])
                .arg(dir.path().join(format!("i-{name}"))),
        );
        assert!(
            e.contains("h.0.attn.c_attn.weight") && e.contains("head 0"),
            "{e}"
        );
        let text = checkpoint_scenario(&file, "", "[0]", 1.0);
        let e = refused(tokdyn().arg("run").arg(write(dir.path(), "r.toml", text)));
        assert!(
            e.contains("model.checkpoint") && e.contains("c_attn"),
            "{e}"
        );
    }
    // Weights of 1e19 form heads of ~1e40, within the entry bound, but the run would creep:
    // refused by the field's scale.
    write(dir.path(), "creep.safetensors", gpt2_f64(1e19));
    let text = checkpoint_scenario("creep.safetensors", "", "[0]", 1.0);
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "cr.toml", text)));
    assert!(
        e.contains("model.checkpoint") && e.contains("field's scale"),
        "{e}"
    );
    // Ordinary weights still inspect and run.
    let path = write(dir.path(), "ok.safetensors", gpt2_f64(0.1));
    let _ = ends_with(
        tokdyn()
            .arg("inspect")
            .arg(&path)
            .args(["--heads", "2", "--out"])
            .arg(dir.path().join("i-ok")),
        0,
        Duration::from_secs(30),
    );
}

/// Item 6: `inspect --out` follows the output rules of the other commands.
#[test]
fn inspect_out_follows_the_output_rules() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tiny-gpt2.safetensors");
    let inspect = |out: &Path| {
        let mut c = tokdyn();
        c.arg("inspect")
            .arg(&tiny)
            .args(["--heads", "4", "--out"])
            .arg(out);
        c
    };
    let e = refused(&mut inspect(Path::new("/")));
    assert!(e.contains("root"), "{e}");
    let file = write(dir.path(), "plain", "keep me");
    let e = refused(&mut inspect(&file));
    assert!(e.contains("not a folder"), "{e}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "keep me");
    let foreign = dir.path().join("foreign");
    fs::create_dir(&foreign).unwrap();
    write(&foreign, "notes.txt", "mine");
    let e = refused(&mut inspect(&foreign));
    assert!(e.contains("not a tokdyn result"), "{e}");
    assert!(!foreign.join("heads.csv").exists());
    let run = dir.path().join("run");
    fs::create_dir(&run).unwrap();
    write(&run, "summary.json", r#"{"label": "converged-clusters"}"#);
    let e = refused(&mut inspect(&run));
    assert!(e.contains("not from `tokdyn inspect`"), "{e}");
    assert!(!run.join("heads.csv").exists());
    // Its own result is replaced; nothing is left beside it.
    let own = dir.path().join("own");
    for _ in 0..2 {
        let _ = ends_with(&mut inspect(&own), 0, Duration::from_secs(30));
    }
    assert!(own.join("heads.csv").is_file());
    let hidden: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(own.join("heads.csv"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644, "heads.csv mode {mode:o}");
    }
}

/// Item 9: short numbers and lists in messages, the keys named, integer axes, file modes.
#[test]
fn messages_name_the_right_key_in_few_characters() {
    let dir = tempfile::tempdir().unwrap();
    // A number of 301 digits is written 1e300.
    let text = "name = \"x\"\n[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 2\n[[model.layers]]\nA = \"identity\"\nV = \"identity\"\n[tokens]\nn = 8\ninit = \"uniform\"\nseed = 1\n[time]\nt_end = 1e300\nsamples = 5\n";
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "n.toml", text)));
    assert!(e.contains("1e300") && e.len() < 300, "{e}");
    // 10^5 params are not listed in full.
    let mut text = String::from("name = \"p\"\n[params]\n");
    for i in 0..100_000 {
        text.push_str(&format!("p{i} = 1.0\n"));
    }
    text.push_str("[model]\nkernel = \"lsa\"\nbeta = 1.0\nd = 2\nA = \"identity\"\nV = [[\"q\", 0], [0, 1]]\n[tokens]\nn = 8\ninit = \"uniform\"\nseed = 1\n[time]\nt_end = 1.0\nsamples = 5\n");
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "p.toml", text)));
    assert!(
        e.contains("unknown param `q`") && e.contains("99988 more") && e.len() < 400,
        "{e}"
    );
    // ids = [] is reported under tokens.ids.
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tiny-gpt2.safetensors");
    let text = format!(
        "name = \"c\"\n[model]\nkernel = \"sa\"\nbeta = 1.0\n[model.checkpoint]\npath = \"{}\"\nformat = \"gpt2\"\nlayers = [0]\nheads = 4\n[tokens]\ninit = \"embedding\"\nids = []\n[time]\nt_end = 1.0\nsamples = 3\n",
        tiny.display()
    );
    let e = refused(tokdyn().arg("run").arg(write(dir.path(), "ids.toml", text)));
    assert!(e.contains("tokens.ids") && !e.contains("tokens.n"), "{e}");
    // --heads 0.
    let e = refused(tokdyn().arg("inspect").arg(&tiny).args(["--heads", "0"]));
    assert!(
        e.contains("--heads") && e.contains("at least 1") && !e.contains("divide"),
        "{e}"
    );
    // An integer axis from 1.5 is refused, not rounded.
    let sweep = sweep_files(
        dir.path(),
        r#""tokens.n" = { from = 1.5, to = 8, steps = 2 }"#,
    );
    let e = refused(
        tokdyn()
            .arg("sweep")
            .arg(&sweep)
            .arg("--out")
            .arg(dir.path().join("s")),
    );
    assert!(e.contains("tokens.n") && e.contains("whole numbers"), "{e}");
    // Sweep files are 0644 like run outputs.
    let sweep = sweep_files(dir.path(), "v11 = { from = 0.1, to = 0.3, steps = 2 }");
    let out = dir.path().join("sw");
    let _ = ends_with(
        tokdyn().arg("sweep").arg(&sweep).arg("--out").arg(&out),
        0,
        Duration::from_secs(60),
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for entry in fs::read_dir(&out).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || entry.path().is_dir() {
                continue;
            }
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o644, "{name}: {mode:o}");
        }
    }
}

/// Entries of `dir` that a stopped command must not leave: lock files and staging folders.
fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".lock") || n.contains(".tmp-"))
        .collect()
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Item 2: one SIGINT or SIGTERM stops a sweep or a run at any moment (drawing included)
/// within a second, exit 130 / 143, with no lock file or staging folder left; a second
/// signal right after the first stops it from outside, just as cleanly.
#[test]
fn one_signal_stops_any_command_within_a_second_and_leaves_no_lock_or_staging() {
    use std::process::{Command as Std, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let sweep = sweep_files(dir.path(), "v11 = { from = 0.05, to = 0.45, steps = 24 }");
    let base = fs::read_to_string(dir.path().join("base.toml"))
        .unwrap()
        .replace("n = 16", "n = 400")
        .replace("kernel = \"lsa\"", "kernel = \"sa\"")
        .replace("t_end = 2.0", "t_end = 30.0");
    write(dir.path(), "base.toml", &base);
    let sweep_text = fs::read_to_string(&sweep)
        .unwrap()
        .replace("model = \"oa\"\n", "");
    write(dir.path(), "sweep.toml", sweep_text);
    let cases = [
        ("sweep", "INT", 130, 300u64, false),
        ("sweep", "TERM", 143, 900, false),
        ("run", "INT", 130, 150, false),
        ("sweep", "INT", 130, 600, true),
        ("run", "TERM", 143, 400, true),
    ];
    for (i, (command, name, code, after_ms, twice)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("o{i}"));
        let input = if command == "sweep" {
            sweep.clone()
        } else {
            dir.path().join("base.toml")
        };
        let mut child = Std::new(assert_cmd::cargo::cargo_bin("tokdyn"))
            .arg(command)
            .arg(&input)
            .arg("--out")
            .arg(&out)
            .env("RAYON_NUM_THREADS", "1")
            .env_remove("SLURM_ARRAY_TASK_ID")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after_ms));
        if child.try_wait().unwrap().is_some() {
            continue; // finished before the signal: nothing to check
        }
        let sent = Instant::now();
        signal(child.id(), name);
        if twice {
            signal(child.id(), name);
        }
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                sent.elapsed() < Duration::from_secs(5),
                "{command} did not stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = sent.elapsed();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        if status.code() == Some(0) {
            // The signal came as the command was ending: its result is complete.
            assert!(
                out.join("summary.json").is_file(),
                "{command} {name}: {err}"
            );
            continue;
        }
        assert_eq!(status.code(), Some(code), "{command} {name}: {err}");
        assert!(took < Duration::from_secs(1), "{command} {name}: {took:?}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(
            leftovers(dir.path()).is_empty(),
            "{:?}",
            leftovers(dir.path())
        );
        if out.exists() {
            assert!(leftovers(&out).is_empty(), "{:?}", leftovers(&out));
        }
    }
}
