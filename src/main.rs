//! The `tokdyn` command line: parse the arguments, hand them to the command of
//! [`tokdyn::command`], map its error to an exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokdyn::command;
use tokdyn::output::RunOptions;
use tokdyn::sweep::SweepOptions;
use tokdyn::Error;

#[derive(Parser)]
#[command(
    name = "tokdyn",
    version,
    about = "Dynamics of transformer tokens on the sphere"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one scenario and label its long-term behaviour.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Output folder [default: output/<name>/].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Model to integrate (overrides run.model).
        #[arg(long, value_parser = ["full", "phase", "ws", "oa", "group", "clusters", "mean-field"])]
        model: Option<String>,
        /// Override a scenario key, e.g. params.v11=0.3 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Run full, phase, ws, oa and group side by side (d = 2, lsa; full and group for lsa otherwise; full and clusters for usa, sa).
    Compare {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Output folder [default: output/<name>/].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a scenario key, e.g. params.v11=0.3 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Ott–Antonsen fixed points, stability, limit cycles and the predicted label (d = 2, lsa).
    Predict {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Folder for predict.json [default: output/<name>/].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a scenario key, e.g. params.v11=0.3 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// OA phase portrait with the run's R2 path (d = 2, lsa).
    Portrait {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Folder with the run to draw (its order.csv), and for portrait.png
        /// [default: output/<name>/].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a scenario key, e.g. params.v11=0.3 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Sweep parameters of a scenario over a grid and label every point.
    Sweep {
        /// The sweep file (TOML).
        sweep: PathBuf,
        /// Sweep folder [default: output/<name>/].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Compute only the points i with i mod N = K-1 (K/N, 1-based).
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Continue an interrupted sweep without recomputing finished points.
        #[arg(long)]
        resume: bool,
        /// Override a key of the base scenario (repeatable), e.g. time.t_max=20000.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Assemble the shard files of a sweep folder into sweep.csv.
    Merge { dir: PathBuf },
    /// List a .safetensors checkpoint's tensors, format, d and layers; with --heads, the
    /// spectra of every head (table and heads.csv).
    Inspect {
        checkpoint: PathBuf,
        /// Number of heads per layer (the files do not store it; must divide d).
        #[arg(long)]
        heads: Option<usize>,
        /// Tensor layout [default: detected from the names].
        #[arg(long, value_parser = ["gpt2", "bert"])]
        format: Option<String>,
        /// Folder for heads.csv [default: output/inspect-<file stem>/].
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error (a bug in tokdyn, please report it): {info}");
        std::process::exit(1);
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            print!("{e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{}", one_line(&e.render().to_string()));
            return ExitCode::from(2);
        }
    };
    install_signal_handlers();
    match on_the_pool(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) if !tokdyn::interrupt::claim_exit() => {
            // A forced stop is under way on the signal thread: it prints and ends the process.
            std::thread::sleep(std::time::Duration::from_secs(5));
            ExitCode::from(tokdyn::interrupt::exit_code().unwrap_or(1))
        }
        Err(e) => {
            // One line, offending values quoted with at most ~80 characters.
            eprintln!("error: {}", tokdyn::input::error_line(&e.to_string()));
            let code = tokdyn::interrupt::exit_code().unwrap_or(e.exit_code());
            ExitCode::from(code)
        }
    }
}

/// clap's message on one line: its first line (with what it lists after a colon, e.g. the
/// missing arguments), and the valid values when it lists them.
fn one_line(text: &str) -> String {
    let mut lines = text.lines();
    let mut first = lines
        .next()
        .unwrap_or("error: bad command line")
        .to_string();
    if first.ends_with(':') {
        // "the following required arguments were not provided:" lists them on the next lines.
        let listed: Vec<&str> = lines.map(str::trim).take_while(|l| !l.is_empty()).collect();
        first = format!("{first} {}", listed.join(", "));
    }
    match text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("[possible values:"))
    {
        Some(values) => format!("{first} {values}"),
        None => first.to_string(),
    }
}

/// SIGINT and SIGTERM ask the running command to stop at its next step (it removes its
/// staging folder and exits 130 / 143). A command that has not stopped within
/// [`tokdyn::interrupt::GRACE`] (drawing a picture, say), or a second signal, is stopped from
/// here: its staging folders and lock files are removed and the process ends with one line.
fn install_signal_handlers() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if tokdyn::interrupt::is_requested() {
                force_stop(signal);
            }
            tokdyn::interrupt::request_signal(signal);
            std::thread::spawn(move || {
                std::thread::sleep(tokdyn::interrupt::GRACE);
                force_stop(signal);
            });
        }
    });
}

/// Ends the process after a signal: removes what the command registered, one line, 128 + signal.
fn force_stop(signal: i32) {
    if !tokdyn::interrupt::claim_exit() {
        // The command is printing its own last line and ending.
        return;
    }
    tokdyn::interrupt::clean_up_now();
    let name = if signal == signal_hook::consts::SIGTERM {
        "SIGTERM"
    } else {
        "SIGINT"
    };
    eprintln!(
        "error: interrupted by {name}: stopped (staging folders and locks removed, any old result is intact)"
    );
    std::process::exit(128 + signal);
}

fn options(out: Option<PathBuf>) -> RunOptions {
    RunOptions {
        out,
        progress: true,
        command_line: std::env::args().collect(),
    }
}

/// The stack of the pool's threads: the main thread's usual 8 MiB (the command runs on one).
const STACK_BYTES: usize = 8 << 20;

/// Runs the command on a thread of rayon's global pool (`RAYON_NUM_THREADS` threads), so that
/// its parallel loops start on the calling thread ([`tokdyn::on_the_pool`]).
fn on_the_pool(command: Command) -> Result<(), Error> {
    // Fails only when a pool exists already; the command then runs on that one.
    let _ = rayon::ThreadPoolBuilder::new()
        .stack_size(STACK_BYTES)
        .build_global();
    tokdyn::on_the_pool(|| execute(command))
}

fn execute(command: Command) -> Result<(), Error> {
    match command {
        Command::Run {
            scenario,
            out,
            model,
            sets,
        } => command::run::cli(&scenario, model, sets, &options(out)),
        Command::Compare {
            scenario,
            out,
            sets,
        } => command::compare::cli(&scenario, &sets, &options(out)),
        Command::Predict {
            scenario,
            out,
            sets,
        } => command::predict::cli(&scenario, &sets, &options(out)),
        Command::Portrait {
            scenario,
            out,
            sets,
        } => command::portrait::cli(&scenario, &sets, &options(out)),
        Command::Sweep {
            sweep,
            out,
            shard,
            resume,
            sets,
        } => command::sweep::cli(
            &sweep,
            &SweepOptions {
                out,
                shard,
                resume,
                sets,
                progress: true,
                command_line: std::env::args().collect(),
            },
        ),
        Command::Merge { dir } => command::merge::cli(&dir),
        Command::Inspect {
            checkpoint,
            heads,
            format,
            out,
        } => command::inspect::cli(&checkpoint, heads, format.as_deref(), out),
    }
}
