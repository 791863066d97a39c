//! Time of one field evaluation against the number of tokens n, by kernel and dimension: the
//! asymptotic cost (O(n d^2) for `lsa`, O(n^2 d) for `usa` and `sa`) measured, fitted and drawn.
//!
//! ```text
//! cargo bench --bench scaling                        # the full grid (20 to 40 minutes on 2 cores)
//! cargo bench --bench scaling -- --quick             # a tiny grid, a few seconds
//! cargo bench --bench scaling -- --max-seconds 60 --min-time 0.5 --only lsa,usa --out DIR
//! cargo bench --bench scaling -- --replot           # table and picture again from scaling.csv
//! ```
//!
//! `--only` measures some kernels and overwrites `<out>/scaling.csv` with them: give it another
//! `--out` to keep the full results.
//!
//! `usa-spectral` and `sa-spectral` are the spectral kernel at beta = 1 (doubles),
//! `usa-spectral-dd` and `sa-spectral-dd` the same at beta = 8 (double-double arithmetic).
//!
//! `group` is the group model's evaluation (`tokdyn::reduced::GroupFlow`, LSA with the same
//! weights): one read-only pass over the tokens for a d x d state, at a fixed Phi = I + 0.1 R
//! (in d = 2 with its second column times 8, |q| about 0.78, so that the evaluation is the pass
//! and not the series). `group-series` (d = 2) is the same at Phi = I + 0.1 R, where the
//! evaluation is the series over the initial tokens' harmonics (docs/MATH.md §2.1; computed in
//! the warm-up evaluation, which is not timed): its cost does not grow with n.
//!
//! Grid: n = 1, 2, 5 x 10^k (about 3 points per decade).
//! - `lsa` and `group`: n = 10^2..10^7 for d = 2; n = 10^2..10^6 for d = 100 (10^7 tokens in d = 100 would
//!   need 8 GB per state vector, and the field holds three: x, dx and the normalised tokens).
//! - `usa`, `sa`: n = 10^2..10^5 for d = 2 and d = 100; a series stops before the first n whose
//!   evaluation, extrapolated from the previous point with the asymptotic power (n^2), would
//!   take more than `--max-seconds` (default 60), and before any n whose vectors would not fit in
//!   the available memory.
//!
//! Each point is measured in a child process (this program with `--point KERNEL D N`), so that
//! a crash of the field loses only that point (the series stops there, the log says why) and
//! every point starts from fresh memory. Each point: one warm-up evaluation, then evaluations until at least `--min-time` seconds
//! (default 0.5; at least one evaluation); the median time per evaluation is reported.
//! Tokens are deterministic pseudo-random unit vectors (a SplitMix64 hash of the index); A and V
//! are those of `benches/field.rs`; beta = 1; one head.
//!
//! Writes `<out>/scaling.csv` (`kernel,d,n,seconds_per_eval,evals`, one row as each point is
//! measured), `<out>/scaling.png` and `<out>/scaling.svg` (default `<out>` = `output/perf`,
//! `output/perf/quick` with `--quick`), prints the log-log slope of each series fitted over
//! n >= 10^3, and (full grid only) copies the picture to `docs/scaling.png`.

use std::fs::{self, File};
use std::hint::black_box;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use nalgebra::DMatrix;
use tokdyn::integrate::Dynamics;
use tokdyn::model::{Attention, Head, Kernel, KernelMethod, SphereField};
use tokdyn::plot::{loglog_slope, scaling_plot, ScalingSeries};
use tokdyn::reduced::GroupFlow;

/// Points with n below this are drawn but not fitted (fixed costs dominate there).
const FIT_MIN_N: usize = 1_000;

struct Options {
    quick: bool,
    max_seconds: f64,
    min_time: f64,
    out: PathBuf,
    only: Option<Vec<String>>,
    /// Draw the picture and the table again from `<out>/scaling.csv`, without measuring.
    replot: bool,
    /// Internal: measure this one point (kernel, d, n) in this process and print the result.
    point: Option<(String, usize, usize)>,
}

const USAGE: &str = "usage: cargo bench --bench scaling -- [--quick] [--max-seconds S] [--min-time S] [--only lsa,usa,sa,usa-spectral,sa-spectral,usa-spectral-dd,sa-spectral-dd,group,group-series] [--out DIR] [--replot]";

fn parse_options() -> Result<Options, String> {
    let mut quick = false;
    let mut max_seconds = 60.0;
    let mut min_time = None;
    let mut out = None;
    let mut only = None;
    let mut point = None;
    let mut replot = false;
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, v: Option<String>| -> Result<f64, String> {
        v.as_deref()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("{flag} needs a number of seconds >= 0"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            "--quick" => quick = true,
            "--replot" => replot = true,
            "--max-seconds" => max_seconds = number("--max-seconds", args.next())?,
            "--min-time" => min_time = Some(number("--min-time", args.next())?),
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a folder")?)),
            "--only" => {
                let list = args.next().ok_or("--only needs kernels, e.g. lsa,usa")?;
                only = Some(list.split(',').map(|s| s.trim().to_string()).collect());
            }
            "--point" => {
                let kernel = args.next().ok_or("--point needs KERNEL D N")?;
                let mut size = || -> Result<usize, String> {
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| "--point needs KERNEL D N".to_string())
                };
                let (d, n) = (size()?, size()?);
                kernel_named(&kernel)?;
                point = Some((kernel, d, n));
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other if other.starts_with('-') => {
                return Err(format!("unknown option {other}\n{USAGE}"))
            }
            // A name filter meant for the criterion benches (`cargo bench -- NAME`).
            other => eprintln!("scaling: ignoring argument {other:?}"),
        }
    }
    let out = out.unwrap_or_else(|| default_out(quick));
    Ok(Options {
        quick,
        max_seconds,
        min_time: min_time.unwrap_or(if quick { 0.1 } else { 0.5 }),
        out,
        only,
        replot,
        point,
    })
}

/// `output/perf`, or `output/perf/quick` for the quick grid.
fn default_out(quick: bool) -> PathBuf {
    let perf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("output")
        .join("perf");
    if quick {
        perf.join("quick")
    } else {
        perf
    }
}

fn kernel_named(name: &str) -> Result<Kernel, String> {
    match name {
        "lsa" => Ok(Kernel::Lsa),
        "usa" => Ok(Kernel::Usa),
        "sa" => Ok(Kernel::Sa),
        // The group model's evaluation (LSA weights).
        "group" | "group-series" => Ok(Kernel::Lsa),
        // The spectral (Fourier–Bessel) kernel, d = 2.
        "usa-spectral" => Ok(Kernel::Usa),
        "sa-spectral" => Ok(Kernel::Sa),
        // The same at beta = 8, where it runs in double-doubles.
        "usa-spectral-dd" => Ok(Kernel::Usa),
        "sa-spectral-dd" => Ok(Kernel::Sa),
        other => Err(format!(
            "unknown kernel {other:?} (lsa, usa, sa, usa-spectral, sa-spectral, usa-spectral-dd, sa-spectral-dd, group, group-series)"
        )),
    }
}

/// 1, 2, 5 x 10^k from 10^lo up to `top` (included when on the grid).
fn grid(lo: u32, top: usize) -> Vec<usize> {
    let mut ns = Vec::new();
    let mut p = 10usize.pow(lo);
    while p <= top {
        ns.extend([p, 2 * p, 5 * p].into_iter().filter(|&n| n <= top));
        p *= 10;
    }
    ns
}

struct Plan {
    kernel: Kernel,
    name: &'static str,
    d: usize,
    ns: Vec<usize>,
}

fn plans(quick: bool) -> Vec<Plan> {
    let plan = |kernel, name, d, top| Plan {
        kernel,
        name,
        d,
        ns: grid(2, top),
    };
    if quick {
        vec![
            plan(Kernel::Lsa, "lsa", 2, 100_000),
            plan(Kernel::Lsa, "lsa", 100, 10_000),
            plan(Kernel::Lsa, "group", 2, 100_000),
            plan(Kernel::Lsa, "group-series", 2, 100_000),
            plan(Kernel::Lsa, "group", 100, 10_000),
            plan(Kernel::Usa, "usa", 2, 5_000),
            plan(Kernel::Sa, "sa", 2, 5_000),
            plan(Kernel::Usa, "usa-spectral", 2, 100_000),
            plan(Kernel::Sa, "sa-spectral", 2, 100_000),
            plan(Kernel::Usa, "usa-spectral-dd", 2, 20_000),
            plan(Kernel::Sa, "sa-spectral-dd", 2, 20_000),
            plan(Kernel::Usa, "usa", 100, 2_000),
            plan(Kernel::Sa, "sa", 100, 2_000),
        ]
    } else {
        vec![
            plan(Kernel::Lsa, "lsa", 2, 10_000_000),
            // Not 10^7: n d = 10^9 numbers, 8 GB per state vector.
            plan(Kernel::Lsa, "lsa", 100, 1_000_000),
            plan(Kernel::Lsa, "group", 2, 10_000_000),
            plan(Kernel::Lsa, "group-series", 2, 10_000_000),
            plan(Kernel::Lsa, "group", 100, 1_000_000),
            plan(Kernel::Usa, "usa", 2, 100_000),
            plan(Kernel::Sa, "sa", 2, 100_000),
            plan(Kernel::Usa, "usa-spectral", 2, 10_000_000),
            plan(Kernel::Sa, "sa-spectral", 2, 10_000_000),
            plan(Kernel::Usa, "usa-spectral-dd", 2, 1_000_000),
            plan(Kernel::Sa, "sa-spectral-dd", 2, 1_000_000),
            plan(Kernel::Usa, "usa", 100, 100_000),
            plan(Kernel::Sa, "sa", 100, 100_000),
        ]
    }
}

/// SplitMix64: a good 64-bit hash of an index.
fn splitmix64(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// n deterministic pseudo-random unit vectors in d dimensions (n x d row-major).
fn tokens(n: usize, d: usize) -> Vec<f64> {
    let mut x: Vec<f64> = (0..(n * d) as u64)
        .map(|i| (splitmix64(i) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect();
    for row in x.chunks_exact_mut(d) {
        let r = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        if r > 0.0 {
            row.iter_mut().for_each(|v| *v /= r);
        } else {
            row[0] = 1.0;
        }
    }
    x
}

/// The attention weights of `benches/field.rs` (beta = 1, or `beta`).
fn attention_at(kernel: Kernel, d: usize, beta: f64) -> Attention {
    let a = DMatrix::from_fn(d, d, |i, j| if i == j { 1.0 } else { 0.1 / d as f64 });
    let v = DMatrix::from_fn(d, d, |i, j| if i == j { 0.5 } else { -0.2 / d as f64 });
    Attention::new(kernel, beta, vec![Head { a, v }])
}

fn attention(kernel: Kernel, d: usize) -> Attention {
    attention_at(kernel, d, 1.0)
}

/// Bytes the measurement of one point holds: x and dx, the field's scratch (the group model:
/// the tokens and its scratch).
fn bytes_needed(name: &str, kernel: Kernel, n: usize, d: usize) -> usize {
    if name.starts_with("group") {
        return n * d * 8 + GroupFlow::scratch_bytes(n, d);
    }
    2 * n * d * 8 + SphereField::scratch_bytes(n, d, kernel, 1)
}

/// One evaluation of the named model's field, ready to time.
fn evaluation(name: &str, kernel: Kernel, d: usize, n: usize) -> Box<dyn FnMut()> {
    let x = tokens(n, d);
    if name.starts_with("group") {
        let flow = GroupFlow::new(attention(kernel, d), x.into()).expect("lsa");
        // Column-major: entry i is in column i / d; in d = 2 the pass stretches column 1.
        let stretch = |i: usize| {
            if name == "group" && d == 2 && i >= d {
                8.0
            } else {
                1.0
            }
        };
        let phi: Vec<f64> = (0..d * d)
            .map(|i| {
                let hash = (splitmix64(i as u64 + 1) >> 11) as f64 / (1u64 << 53) as f64;
                stretch(i) * (0.1 * (2.0 * hash - 1.0) + if i % (d + 1) == 0 { 1.0 } else { 0.0 })
            })
            .collect();
        let mut dphi = vec![0.0; d * d];
        return Box::new(move || {
            flow.rhs(black_box(&phi), &mut dphi);
            black_box(&dphi);
        });
    }
    let method = if name.contains("-spectral") {
        KernelMethod::Spectral
    } else {
        KernelMethod::Direct
    };
    // beta = 8: beta (|a| + |b|) = 8.4, past the doubles' bound (3.05), within the
    // double-doubles' (21.1).
    let beta = if name.ends_with("-dd") { 8.0 } else { 1.0 };
    let field = SphereField::with_kernel_method(attention_at(kernel, d, beta), n, method)
        .expect("the series' kernel method applies");
    let mut dx = vec![0.0; n * d];
    Box::new(move || {
        field.eval(black_box(&x), &mut dx);
        black_box(&dx);
    })
}

/// MemAvailable from /proc/meminfo, in bytes.
fn memory_available() -> Option<usize> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Warm-up, then timed evaluations until `min_time`; returns (median seconds, evaluations).
fn measure(name: &str, kernel: Kernel, d: usize, n: usize, min_time: f64) -> (f64, usize) {
    let mut eval = evaluation(name, kernel, d, n);
    eval();
    let mut times = Vec::new();
    let mut total = 0.0;
    while times.is_empty() || total < min_time {
        let start = Instant::now();
        eval();
        let s = start.elapsed().as_secs_f64();
        times.push(s);
        total += s;
    }
    times.sort_by(f64::total_cmp);
    let m = times.len();
    let median = if m % 2 == 1 {
        times[m / 2]
    } else {
        0.5 * (times[m / 2 - 1] + times[m / 2])
    };
    (median, m)
}

/// Measures one point in a child process (this program with `--point`), so that a crash of the
/// field (a panic, or a signal) loses that point only and every point starts from fresh memory.
fn measure_in_child(name: &str, d: usize, n: usize, min_time: f64) -> Result<(f64, usize), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let output = Command::new(exe)
        .args(["--point", name, &d.to_string(), &n.to_string()])
        .args(["--min-time", &min_time.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start the measurement: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the measurement failed ({}; messages above)",
            output.status
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("point "))
        .ok_or_else(|| format!("no result from the measurement: {text:?}"))?;
    let mut words = line.split_whitespace();
    let seconds = words.next().and_then(|w| w.parse::<f64>().ok());
    let evals = words.next().and_then(|w| w.parse::<usize>().ok());
    seconds
        .zip(evals)
        .ok_or_else(|| format!("unreadable result from the measurement: {line:?}"))
}

struct Measured {
    name: String,
    d: usize,
    n: Vec<f64>,
    seconds: Vec<f64>,
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some((kernel, d, n)) = &options.point {
        let (seconds, evals) = measure(
            kernel,
            kernel_named(kernel).expect("checked"),
            *d,
            *n,
            options.min_time,
        );
        println!("point {seconds:e} {evals}");
        return ExitCode::SUCCESS;
    }
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> io::Result<()> {
    fs::create_dir_all(&options.out)?;
    let csv_path = options.out.join("scaling.csv");
    let started = Instant::now();
    let results = if options.replot {
        println!("scaling: drawing {} again", csv_path.display());
        read_csv(&csv_path)?
    } else {
        measure_all(options, &csv_path)?
    };
    report(options, &results)?;
    println!("total {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The series of a `scaling.csv`, in the order of their first rows.
fn read_csv(path: &Path) -> io::Result<Vec<Measured>> {
    let bad = |line: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}:{line}: {what}", path.display()),
        )
    };
    let text = fs::read_to_string(path)?;
    let mut results: Vec<Measured> = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.trim().split(',').collect();
        if fields.len() != 5 {
            return Err(bad(i + 1, "expected kernel,d,n,seconds_per_eval,evals"));
        }
        let d: usize = fields[1].parse().map_err(|_| bad(i + 1, "bad d"))?;
        let n: f64 = fields[2].parse().map_err(|_| bad(i + 1, "bad n"))?;
        let t: f64 = fields[3].parse().map_err(|_| bad(i + 1, "bad seconds"))?;
        let at = results.iter().position(|m| m.name == fields[0] && m.d == d);
        let m = match at {
            Some(k) => &mut results[k],
            None => {
                results.push(Measured {
                    name: fields[0].to_string(),
                    d,
                    n: Vec::new(),
                    seconds: Vec::new(),
                });
                results.last_mut().expect("just pushed")
            }
        };
        m.n.push(n);
        m.seconds.push(t);
    }
    Ok(results)
}

/// Measures every point of the grid, writing `csv_path` as it goes.
fn measure_all(options: &Options, csv_path: &Path) -> io::Result<Vec<Measured>> {
    let mut csv = File::create(csv_path)?;
    writeln!(csv, "kernel,d,n,seconds_per_eval,evals")?;
    let threads = rayon::current_num_threads();
    println!(
        "scaling: {} grid, {threads} rayon threads, max {} s per evaluation, at least {} s of evaluations per point",
        if options.quick { "quick" } else { "full" },
        options.max_seconds,
        options.min_time
    );
    println!("lsa d = 100 stops at n = 10^6: n = 10^7 would need 8 GB per state vector");
    let started = Instant::now();
    let mut results = Vec::new();
    for plan in plans(options.quick) {
        if let Some(only) = &options.only {
            if !only.iter().any(|k| k == plan.name) {
                continue;
            }
        }
        let power = if plan.kernel == Kernel::Lsa { 1.0 } else { 2.0 };
        let mut measured = Measured {
            name: plan.name.to_string(),
            d: plan.d,
            n: Vec::new(),
            seconds: Vec::new(),
        };
        for &n in &plan.ns {
            if let (Some(&last_n), Some(&last_t)) = (measured.n.last(), measured.seconds.last()) {
                let predicted = last_t * (n as f64 / last_n).powf(power);
                if predicted > options.max_seconds {
                    println!(
                        "{} d={} n={n}: skipped, and the larger n: predicted {predicted:.1} s per evaluation > {} s",
                        plan.name, plan.d, options.max_seconds
                    );
                    break;
                }
            }
            let need = bytes_needed(plan.name, plan.kernel, n, plan.d);
            if let Some(available) = memory_available() {
                if need > available / 10 * 8 {
                    println!(
                        "{} d={} n={n}: skipped, and the larger n: needs {:.1} GB, {:.1} GB available",
                        plan.name,
                        plan.d,
                        need as f64 / 1e9,
                        available as f64 / 1e9
                    );
                    break;
                }
            }
            let (seconds, evals) = match measure_in_child(plan.name, plan.d, n, options.min_time) {
                Ok(point) => point,
                Err(e) => {
                    println!(
                        "{} d={} n={n}: {e}; the series stops here",
                        plan.name, plan.d
                    );
                    break;
                }
            };
            println!(
                "{} d={} n={n}: {seconds:.4e} s per evaluation (median of {evals}), {:.0} s elapsed",
                plan.name,
                plan.d,
                started.elapsed().as_secs_f64()
            );
            writeln!(csv, "{},{},{n},{seconds:.6e},{evals}", plan.name, plan.d)?;
            csv.flush()?;
            measured.n.push(n as f64);
            measured.seconds.push(seconds);
        }
        results.push(measured);
    }
    Ok(results)
}

/// Fits, prints the table, draws the picture (and copies it to docs/ for the full grid).
fn report(options: &Options, results: &[Measured]) -> io::Result<()> {
    let threads = rayon::current_num_threads();
    println!("\nlog-log slope of seconds per evaluation against n, fitted over n >= {FIT_MIN_N}:");
    println!(
        "{:<7} {:>4} {:>7} {:>20} {:>7}",
        "kernel", "d", "points", "n fitted", "slope"
    );
    let mut series = Vec::new();
    for m in results {
        let fit: Vec<usize> = (0..m.n.len())
            .filter(|&i| m.n[i] >= FIT_MIN_N as f64)
            .collect();
        let fn_: Vec<f64> = fit.iter().map(|&i| m.n[i]).collect();
        let ft: Vec<f64> = fit.iter().map(|&i| m.seconds[i]).collect();
        let slope = loglog_slope(&fn_, &ft);
        let range = match (fn_.first(), fn_.last()) {
            (Some(a), Some(b)) => format!("{a:.0e} .. {b:.0e}"),
            _ => "-".to_string(),
        };
        println!(
            "{:<7} {:>4} {:>7} {:>20} {:>7}",
            m.name,
            m.d,
            fn_.len(),
            range,
            if slope.is_finite() {
                format!("{slope:.3}")
            } else {
                "n/a".into()
            }
        );
        series.push(ScalingSeries {
            label: format!("{} d={}", m.name, m.d),
            n: m.n.clone(),
            seconds: m.seconds.clone(),
            slope,
        });
    }
    let title = format!(
        "Time of one field evaluation against the number of tokens\n{threads} threads; median of repeated evaluations; slopes fitted over n ≥ 10³{}",
        if options.quick { " (quick grid)" } else { "" }
    );
    let files = scaling_plot(&options.out, &series, &title)?;
    println!();
    if !options.replot {
        println!("wrote {}", options.out.join("scaling.csv").display());
    }
    for f in &files {
        println!("wrote {}", f.display());
    }
    if !options.quick && options.only.is_none() && options.out == default_out(false) {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        fs::create_dir_all(&docs)?;
        let target = docs.join("scaling.png");
        fs::copy(&files[0], &target)?;
        println!("copied the picture to {}", target.display());
    }
    Ok(())
}
