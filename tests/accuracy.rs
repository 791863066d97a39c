//! Numerical checks against independent computations: the phase model written plainly here,
//! the OA ODE solved here, conservation of |x_k| = 1, tolerance convergence of USA and SA.

use std::path::Path;

use num_complex::Complex64;
use tokdyn::integrate::{solve, Method};
use tokdyn::observe::{Observer, OrderSeries};
use tokdyn::scenario::{ModelKind, Scenario};
use tokdyn::simulation;

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml_str(text, Path::new("test.toml"), Path::new("."), &[]).unwrap()
}

fn lsa2(
    a: [[f64; 2]; 2],
    v: [[f64; 2]; 2],
    n: usize,
    init: &str,
    t_end: f64,
    samples: usize,
    rtol: f64,
) -> String {
    format!(
        r#"
name = "t"
[model]
kernel = "lsa"
beta = 1.3
d = 2
A = [[{}, {}], [{}, {}]]
V = [[{}, {}], [{}, {}]]
[tokens]
n = {n}
{init}
seed = 7
[time]
t_end = {t_end}
samples = {samples}
[solver]
rtol = {rtol}
atol = {}
"#,
        a[0][0],
        a[0][1],
        a[1][0],
        a[1][1],
        v[0][0],
        v[0][1],
        v[1][0],
        v[1][1],
        rtol * 1e-2
    )
}

fn series_of(s: &Scenario, model: ModelKind) -> (OrderSeries, tokdyn::integrate::Solution) {
    let sim = simulation::build(s, model).unwrap();
    let mut series = OrderSeries::new();
    let sol = solve(
        &sim.problem(),
        sim.method,
        &mut [&mut series as &mut dyn Observer],
    )
    .unwrap();
    assert!(sol.status.is_success());
    (series, sol)
}

/// A few fixed "random" 2 x 2 matrices.
type Matrix2 = [[f64; 2]; 2];

fn weights() -> Vec<(Matrix2, Matrix2)> {
    vec![
        ([[0.3, -1.1], [0.7, 0.4]], [[0.9, 0.2], [-0.5, 0.6]]),
        ([[-0.8, 0.5], [0.2, 1.2]], [[0.1, -0.9], [1.3, -0.4]]),
        ([[1.0, 0.0], [0.0, 1.0]], [[0.2, 1.0], [-1.0, -0.2]]),
    ]
}

/// The Kuramoto model of docs/MATH.md §3, written out from the formulas and integrated with
/// classical RK4 at a small fixed step.
fn plain_phase_model(
    a: [[f64; 2]; 2],
    v: [[f64; 2]; 2],
    beta: f64,
    xi0: &[f64],
    t_end: f64,
    steps: usize,
) -> Complex64 {
    let parts = |m: [[f64; 2]; 2]| {
        (
            Complex64::new((m[0][0] + m[1][1]) / 2.0, (m[1][0] - m[0][1]) / 2.0),
            Complex64::new((m[0][0] - m[1][1]) / 2.0, (m[1][0] + m[0][1]) / 2.0),
        )
    };
    let (ap, am) = parts(a);
    let (vp, vm) = parts(v);
    let field = |xi: &[f64]| -> Vec<f64> {
        let r: Complex64 = xi
            .iter()
            .map(|x| Complex64::from_polar(1.0, *x))
            .sum::<Complex64>()
            / xi.len() as f64;
        let g = ap * vp * r + ap * vm + am * vp + am * vm * r.conj();
        let c = ap.conj() * vp + am.conj() * vm + ap.conj() * vm * r.conj() + am.conj() * vp * r;
        let (omega, h) = (beta * c.im, g * beta);
        xi.iter()
            .map(|x| omega + (h * Complex64::from_polar(1.0, -x)).im)
            .collect()
    };
    let dt = t_end / steps as f64;
    let mut xi = xi0.to_vec();
    for _ in 0..steps {
        let k1 = field(&xi);
        let y2: Vec<f64> = xi.iter().zip(&k1).map(|(x, k)| x + 0.5 * dt * k).collect();
        let k2 = field(&y2);
        let y3: Vec<f64> = xi.iter().zip(&k2).map(|(x, k)| x + 0.5 * dt * k).collect();
        let k3 = field(&y3);
        let y4: Vec<f64> = xi.iter().zip(&k3).map(|(x, k)| x + dt * k).collect();
        let k4 = field(&y4);
        for i in 0..xi.len() {
            xi[i] += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
        }
    }
    xi.iter()
        .map(|x| Complex64::from_polar(1.0, *x))
        .sum::<Complex64>()
        / xi.len() as f64
}

#[test]
fn full_model_matches_the_plain_phase_model() {
    for (a, v) in weights() {
        let s = scenario(&lsa2(a, v, 24, "init = \"uniform\"", 6.0, 7, 1e-12));
        let (full, _) = series_of(&s, ModelKind::Full);
        let tokens = s.initial_tokens().unwrap();
        let xi0: Vec<f64> = tokens.chunks(2).map(|x| 2.0 * x[1].atan2(x[0])).collect();
        let expected = plain_phase_model(a, v, 1.3, &xi0, 6.0, 6000);
        let got = *full.r2.last().unwrap();
        assert!((got - expected).norm() < 1e-8, "{got} vs {expected}");
    }
}

#[test]
fn phase_and_watanabe_strogatz_equal_the_full_model() {
    for (a, v) in weights() {
        let s = scenario(&lsa2(a, v, 40, "init = \"uniform\"", 20.0, 201, 1e-11));
        let (full, _) = series_of(&s, ModelKind::Full);
        for model in [ModelKind::Phase, ModelKind::Ws] {
            let (red, _) = series_of(&s, model);
            let err = red
                .r2
                .iter()
                .zip(&full.r2)
                .map(|(x, y)| (x - y).norm())
                .fold(0.0, f64::max);
            assert!(err < 1e-8, "{model}: max |dR2| = {err}");
            // Tokens too: R1 (which needs every token's sign) agrees.
            let err1 = red
                .r1
                .iter()
                .zip(&full.r1)
                .map(|(x, y)| (x.unwrap() - y.unwrap()).abs())
                .fold(0.0, f64::max);
            assert!(err1 < 1e-7, "{model}: max |dR1| = {err1}");
        }
    }
}

#[test]
fn ott_antonsen_model_solves_the_oa_ode() {
    let (a, v) = weights()[0];
    let s = scenario(&lsa2(
        a,
        v,
        64,
        "init = \"poisson\"\nr0 = 0.4\nphi0 = 0.5",
        10.0,
        11,
        1e-12,
    ));
    let (oa, _) = series_of(&s, ModelKind::Oa);
    // The OA ODE of docs/MATH.md §3 by RK4 here, from R(0) = r0 e^{i phi0}.
    let parts = |m: [[f64; 2]; 2]| {
        (
            Complex64::new((m[0][0] + m[1][1]) / 2.0, (m[1][0] - m[0][1]) / 2.0),
            Complex64::new((m[0][0] - m[1][1]) / 2.0, (m[1][0] + m[0][1]) / 2.0),
        )
    };
    let (ap, am) = parts(a);
    let (vp, vm) = parts(v);
    let f = |r: Complex64| {
        let g = (ap * vp * r + ap * vm + am * vp + am * vm * r.conj()) * 1.3;
        let c = ap.conj() * vp + am.conj() * vm + ap.conj() * vm * r.conj() + am.conj() * vp * r;
        Complex64::new(0.0, 1.3 * c.im) * r + (g - g.conj() * r * r) * 0.5
    };
    let mut r = Complex64::from_polar(0.4, 0.5);
    let dt = 1e-3;
    for _ in 0..10_000 {
        let k1 = f(r);
        let k2 = f(r + k1 * (dt / 2.0));
        let k3 = f(r + k2 * (dt / 2.0));
        let k4 = f(r + k3 * dt);
        r += (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0);
    }
    assert!((oa.r2[10] - r).norm() < 1e-10, "{} vs {r}", oa.r2[10]);
}

#[test]
fn ott_antonsen_error_falls_as_n_grows() {
    // A clustering case (tr A > 0, V = I) from a Poisson start: the OA error is O(|Z|^n).
    let a = [[0.6, -0.9], [0.4, 0.2]];
    let v = [[1.0, 0.0], [0.0, 1.0]];
    let mut errors = Vec::new();
    for n in [64, 256, 1024] {
        let s = scenario(&lsa2(
            a,
            v,
            n,
            "init = \"poisson\"\nr0 = 0.5\nphi0 = 0.3",
            20.0,
            201,
            1e-10,
        ));
        let (full, _) = series_of(&s, ModelKind::Full);
        let (oa, _) = series_of(&s, ModelKind::Oa);
        errors.push(
            oa.r2
                .iter()
                .zip(&full.r2)
                .map(|(x, y)| (x - y).norm())
                .fold(0.0, f64::max),
        );
    }
    eprintln!("OA vs full, max |dR2| for n = 64, 256, 1024: {errors:?}");
    assert!(errors[0] > 1e-4, "{errors:?}");
    assert!(
        errors[0] > 1.5 * errors[1] && errors[1] > 1.5 * errors[2],
        "{errors:?}"
    );
}

#[test]
fn tokens_stay_on_the_sphere_where_it_repels() {
    // A = I, V symmetric negative definite: off the sphere the plain projection would make
    // |x| grow exponentially (docs/MATH.md §1).
    let text = r#"
name = "t"
[model]
kernel = "lsa"
beta = 1.0
d = 2
A = "identity"
V = [[-1.0, 0.3], [0.3, -2.0]]
[tokens]
n = 200
init = "uniform"
[time]
t_end = 1000.0
samples = 101
"#;
    let (series, sol) = series_of(&scenario(text), ModelKind::Full);
    assert!(sol.norm_drift_max <= 1e-12, "{}", sol.norm_drift_max);
    // Within a step (the state is projected after every step) the integrator stays close too.
    assert!(sol.step_drift_max <= 1e-11, "{}", sol.step_drift_max);
    for x in sol.final_state.chunks(2) {
        assert!(((x[0] * x[0] + x[1] * x[1]).sqrt() - 1.0).abs() <= 1e-12);
    }
    assert!(series.nematic.last().unwrap() < &1.0);
}

#[test]
fn softmax_kernels_converge_with_the_tolerance() {
    for kernel in ["usa", "sa"] {
        let text = format!(
            r#"
name = "t"
[model]
kernel = "{kernel}"
beta = 1.5
d = 3
A = {{ random = "gaussian", seed = 1 }}
V = {{ random = "gaussian", seed = 2 }}
[tokens]
n = 30
init = "uniform"
seed = 3
[time]
t_end = 5.0
samples = 11
"#
        );
        let s = scenario(&text);
        let sim = simulation::build(&s, ModelKind::Full).unwrap();
        let run = |tol: f64| {
            let mut series = OrderSeries::new();
            let method = Method::Dop853 {
                rtol: tol,
                atol: tol,
            };
            solve(
                &sim.problem(),
                method,
                &mut [&mut series as &mut dyn Observer],
            )
            .unwrap();
            series
        };
        // Against a run at tolerance 1e-13: the error is of the order of the tolerance and
        // shrinks with it (DOP853's global error follows the local tolerance, up to a modest
        // factor from the growth of errors along the flow).
        let reference = run(1e-13);
        let error = |tol: f64| {
            run(tol)
                .r2
                .iter()
                .zip(&reference.r2)
                .map(|(x, y)| (x - y).norm())
                .fold(0.0, f64::max)
        };
        let (loose, tight) = (error(1e-6), error(1e-9));
        assert!(loose < 30.0 * 1e-6, "{kernel} tol 1e-6: {loose}");
        assert!(tight < 30.0 * 1e-9, "{kernel} tol 1e-9: {tight}");
        assert!(tight < loose / 100.0, "{kernel}: {loose} -> {tight}");
    }
}

#[test]
fn every_method_converges_to_the_same_answer() {
    let (a, v) = weights()[1];
    let s = scenario(&lsa2(a, v, 16, "init = \"uniform\"", 4.0, 5, 1e-12));
    let sim = simulation::build(&s, ModelKind::Full).unwrap();
    let run = |method| {
        let mut series = OrderSeries::new();
        solve(
            &sim.problem(),
            method,
            &mut [&mut series as &mut dyn Observer],
        )
        .unwrap();
        *series.r2.last().unwrap()
    };
    let reference = run(Method::Dop853 {
        rtol: 1e-13,
        atol: 1e-15,
    });
    assert!(
        (run(Method::Dopri5 {
            rtol: 1e-11,
            atol: 1e-13
        }) - reference)
            .norm()
            < 1e-8
    );
    // RK4 is fourth order: halving dt divides the error by about 16.
    let e1 = (run(Method::Rk4 { dt: 0.02 }) - reference).norm();
    let e2 = (run(Method::Rk4 { dt: 0.01 }) - reference).norm();
    assert!(
        e1 < 1e-5 && (e1 / e2) > 12.0 && (e1 / e2) < 20.0,
        "{e1} {e2}"
    );
}
