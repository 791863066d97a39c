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

#[test]
fn every_method_stops_after_the_sample_that_requested_it() {
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
