//! The mean field (docs/MATH.md §17): usa, beta = 5, A = V = I, T = 1, to t = 100 (1001 samples)
//! from a near-uniform density, at two tolerances; prints the grid, the steps, the
//! evaluations, the seconds and the cost of one evaluation against the FFTs' flop count
//! (4 complex FFTs of N points per evaluation, 5 N log2 N flops each). Then the same in d = 3
//! (axisymmetric, Gegenbauer modes on m Gauss nodes): the cost of one evaluation against its
//! three m x (L + 1) table products (2 m (L + 1) flops each).

use std::time::Instant;

use tokdyn::mean_field::start::Shape;
use tokdyn::mean_field::{solve, Kernel, MeanFieldHead, MeanFieldProblem, StartDensity};

fn main() {
    let i2 = [[1.0, 0.0], [0.0, 1.0]];
    for rtol in [1e-6, 1e-9] {
        let p = MeanFieldProblem {
            d: 2,
            kernel: Kernel::Usa,
            beta: 5.0,
            heads: vec![MeanFieldHead { a: i2, v: i2 }],
            temperature: 1.0,
            start: StartDensity {
                shape: Shape::Uniform,
                modes: vec![(1, 0.01, 0.0), (3, 0.01, 0.5)],
            },
            rtol,
            atol: rtol * 1e-3,
            t_end: 100.0,
            samples: 1001,
            grid: None,
            max_grid: 4096,
        };
        let clock = Instant::now();
        let r = solve(&p, &mut []).expect("no observer fails");
        let seconds = clock.elapsed().as_secs_f64();
        let n = r.summary.grid as f64;
        let evals = r.solution.rhs_evals as f64;
        let fft_flops = 4.0 * 5.0 * n * n.log2();
        let per_eval = seconds / evals;
        println!(
            "rtol {rtol:e}: grid {} (from {}), {} steps, {} evaluations, {seconds:.3} s, \
             {:.2} us per evaluation, FFT flops per evaluation {:.0} ({:.2} GFLOP/s if only the FFTs counted)",
            r.summary.grid,
            r.summary.grid_start,
            r.solution.accepted_steps,
            r.solution.rhs_evals,
            per_eval * 1e6,
            fft_flops,
            fft_flops / per_eval * 1e-9,
        );
    }
    for rtol in [1e-6, 1e-9] {
        let p = MeanFieldProblem {
            d: 3,
            kernel: Kernel::Usa,
            beta: 5.0,
            heads: vec![MeanFieldHead { a: i2, v: i2 }],
            temperature: 1.0,
            start: StartDensity {
                shape: Shape::Uniform,
                modes: vec![(1, 0.01, 0.0), (3, 0.01, 0.0)],
            },
            rtol,
            atol: rtol * 1e-3,
            t_end: 100.0,
            samples: 1001,
            grid: None,
            max_grid: 2048,
        };
        let clock = Instant::now();
        let r = solve(&p, &mut []).expect("no observer fails");
        let seconds = clock.elapsed().as_secs_f64();
        let m = r.summary.grid as f64;
        let modes = tokdyn::mean_field::sphere::top_degree(r.summary.grid) as f64 + 1.0;
        let evals = r.solution.rhs_evals as f64;
        let flops = 3.0 * 2.0 * m * modes;
        let per_eval = seconds / evals;
        println!(
            "d = 3, rtol {rtol:e}: grid {} (from {}), {} steps, {} evaluations, {seconds:.3} s, \
             {:.2} us per evaluation, table flops per evaluation {:.0} ({:.2} GFLOP/s)",
            r.summary.grid,
            r.summary.grid_start,
            r.solution.accepted_steps,
            r.solution.rhs_evals,
            per_eval * 1e6,
            flops,
            flops / per_eval * 1e-9,
        );
    }
}
