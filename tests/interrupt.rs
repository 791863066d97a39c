//! The interruption flag stops `solve` at the next step with `Status::Interrupted`.
//! (Its own test binary: the flag is process-wide.)

use std::borrow::Cow;
use std::io;

use num_complex::Complex64;
use tokdyn::integrate::{solve, Dynamics, Method, Problem, Status};
use tokdyn::interrupt;
use tokdyn::observe::{Observer, OrderParameters, OrderSeries, Sample};

/// y' = -y.
struct Decay;
impl Dynamics for Decay {
    fn dimension(&self) -> usize {
        1
    }
    fn rhs(&self, y: &[f64], dy: &mut [f64]) {
        dy[0] = -y[0]
    }
    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        OrderParameters::from_r2(Complex64::new(y[0], 0.0))
    }
    fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        None
    }
}

/// Requests an interruption when it sees sample `at`.
struct Tripwire {
    at: usize,
}
impl Observer for Tripwire {
    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        if s.index == self.at {
            interrupt::request();
        }
        Ok(())
    }
}

/// The interruption flag is process-wide: the tests of this file take turns.
static FLAG: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_method_stops_after_the_sample_that_requested_it() {
    let _turn = FLAG.lock().unwrap_or_else(|e| e.into_inner());
    let methods = [
        Method::Dop853 {
            rtol: 1e-10,
            atol: 1e-12,
        },
        Method::Dopri5 {
            rtol: 1e-10,
            atol: 1e-12,
        },
        Method::Rk4 { dt: 0.01 },
    ];
    for method in methods {
        interrupt::clear();
        let problem = Problem {
            dynamics: &Decay,
            initial_state: vec![1.0],
            t_end: 10.0,
            samples: 11,
        };
        let mut series = OrderSeries::new();
        let mut trip = Tripwire { at: 3 };
        let sol = solve(&problem, method, &mut [&mut series, &mut trip]).unwrap();
        // Samples 0..=3 were observed; the run stops before reaching sample 4 (t = 4).
        assert_eq!(sol.samples, 4, "{method:?}");
        match sol.status {
            Status::Interrupted { t } => assert!((3.0..4.0).contains(&t), "{method:?}: t = {t}"),
            other => panic!("{method:?}: {other:?}"),
        }
        assert!(sol.status.to_string().starts_with("interrupted at t = 3"));
        assert_eq!(sol.t_last, 3.0);
        // The state handed back is the last observed one, e^{-3}.
        assert!((series.r2[3].re - (-3.0f64).exp()).abs() < 1e-6);
        // Cleared: the same problem runs to the end.
        interrupt::clear();
        assert!(!interrupt::is_requested());
        let sol = solve(&problem, method, &mut []).unwrap();
        assert!(sol.status.is_success(), "{method:?}");
        assert!((sol.final_state[0] - (-10.0f64).exp()).abs() < 1e-6);
    }
}

/// y' = rate, a layer of a stack.
struct Drift(f64);
impl Dynamics for Drift {
    fn dimension(&self) -> usize {
        1
    }
    fn rhs(&self, _y: &[f64], dy: &mut [f64]) {
        dy[0] = self.0
    }
    fn order_parameters(&self, y: &[f64]) -> OrderParameters {
        OrderParameters::from_r2(Complex64::new(y[0], 0.0))
    }
    fn tokens<'a>(&self, _y: &'a [f64]) -> Option<Cow<'a, [f64]>> {
        None
    }
}

/// Records the published clock at every sample.
struct ClockReader(Vec<(f64, f64)>);
impl Observer for ClockReader {
    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        self.0.push((s.t, interrupt::clock()));
        Ok(())
    }
}

/// Issue 26, item 3: across a looped stack of short layers the clock shows the run's time
/// (what the progress line prints), not the time within the current layer.
#[test]
fn the_clock_of_a_stack_shows_the_run_time() {
    let _turn = FLAG.lock().unwrap_or_else(|e| e.into_inner());
    use tokdyn::integrate::Piecewise;
    interrupt::clear();
    let stack = Piecewise::new(
        vec![Box::new(Drift(1.0)), Box::new(Drift(-1.0))],
        vec![0.05, 0.05],
        true,
    );
    let problem = Problem {
        dynamics: &stack,
        initial_state: vec![0.0],
        t_end: 5.0,
        samples: 6,
    };
    let mut reader = ClockReader(Vec::new());
    let sol = solve(
        &problem,
        Method::Dop853 {
            rtol: 1e-9,
            atol: 1e-11,
        },
        &mut [&mut reader],
    )
    .unwrap();
    assert!(sol.status.is_success());
    for &(t, clock) in reader.0.iter().skip(1) {
        assert!(
            (clock - t).abs() <= 0.05 + 1e-9,
            "sample t = {t}, clock {clock}"
        );
    }
    // A boundary keeps R2, R1 and s, not the d-vector of the cluster axis.
    assert!(sol.boundaries.iter().all(|b| b.order.axis.is_none()));
    assert_eq!(sol.boundaries.len(), 101);
}
