//! The pseudo-arclength corrector every continuation of `bifurcation/` calls (docs/MATH.md §10.4).
//!
//! A curve of solutions of G(y) = 0, G: R^(k+1) -> R^k, is followed by a step along its unit
//! tangent and Newton's method on the augmented (bordered) system
//!
//! ```text
//! [ DG(y) ] dy = [ G(y)      ],     y <- y - dy,
//! [ n^T   ]      [ n . y - c ]
//! ```
//!
//! which adds the hyperplane n . y = c across the curve to the k equations. The same matrix with
//! the last row replaced by the previous tangent gives the new tangent: the solution t of
//! [DG; t_prev^T] t = e_(k+1), normalised, is the null vector of DG oriented along t_prev.
//! The OA fixed points (`continuation.rs`), the fold and Hopf curves (`codim2.rs`), the
//! stationary densities (`stationary/branch.rs`) and the cycles (`cycles.rs`) differ only in G,
//! DG and in when a Newton step counts as converged.

use nalgebra::allocator::Allocator;
use nalgebra::{DefaultAllocator, Dim, DimMin, OMatrix, OVector};

/// The augmented system at y: the square matrix whose first k rows are DG(y) and the vector
/// whose first k entries are G(y); the corrector writes the last row and entry.
pub(crate) type Bordered<D> = (OMatrix<f64, D, D>, OVector<f64, D>);

/// What the caller makes of one Newton step dy (y already updated, finite).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not converged yet: another step.
    Again,
    /// Converged: the caller checks the residual of the returned y.
    Converged,
    /// The iterate left the admissible set: no solution from this guess.
    Abandon,
}

/// Writes the border row n^T into the last row of `m`.
fn border<D: Dim>(m: &mut OMatrix<f64, D, D>, n: &OVector<f64, D>)
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    let k = m.nrows() - 1;
    for j in 0..m.ncols() {
        m[(k, j)] = n[j];
    }
}

/// Newton on G(y) = 0, n . y = c from `guess`, at most `iterations` steps. `bordered` gives the
/// augmented system at y (`None`: G cannot be evaluated there); `judge` says whether a step
/// converged. `Ok(None)` when the matrix is singular, the iterate is not finite, the caller
/// abandons it or the steps run out.
pub(crate) fn correct<D: DimMin<D, Output = D>, E>(
    guess: OVector<f64, D>,
    n: &OVector<f64, D>,
    c: f64,
    iterations: usize,
    mut bordered: impl FnMut(&OVector<f64, D>) -> Result<Option<Bordered<D>>, E>,
    mut judge: impl FnMut(&OVector<f64, D>, &OVector<f64, D>) -> Step,
) -> Result<Option<OVector<f64, D>>, E>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    let mut y = guess;
    for _ in 0..iterations {
        let Some((mut m, mut rhs)) = bordered(&y)? else {
            return Ok(None);
        };
        border(&mut m, n);
        let k = rhs.len() - 1;
        rhs[k] = n.dot(&y) - c;
        let Some(step) = m.lu().solve(&rhs) else {
            return Ok(None);
        };
        y -= &step;
        if !y.iter().all(|v| v.is_finite()) {
            return Ok(None);
        }
        match judge(&step, &y) {
            Step::Again => {}
            Step::Converged => return Ok(Some(y)),
            Step::Abandon => return Ok(None),
        }
    }
    Ok(None)
}

/// The usual judge: converged when |dy| < `tol` (1 + |y|).
pub(crate) fn small_step<D: Dim>(tol: f64) -> impl Fn(&OVector<f64, D>, &OVector<f64, D>) -> Step
where
    DefaultAllocator: Allocator<D>,
{
    move |step, y| {
        if step.norm() < tol * (1.0 + y.norm()) {
            Step::Converged
        } else {
            Step::Again
        }
    }
}

/// The unit tangent from the augmented matrix `m` (its first k rows DG), oriented along `prev`:
/// the solution of [DG; prev^T] t = e_(k+1), normalised; `None` where it is singular.
pub(crate) fn tangent<D: DimMin<D, Output = D>>(
    mut m: OMatrix<f64, D, D>,
    prev: &OVector<f64, D>,
) -> Option<OVector<f64, D>>
where
    DefaultAllocator: Allocator<D, D> + Allocator<D>,
{
    border(&mut m, prev);
    let (rows, cols) = prev.shape_generic();
    let mut rhs = OVector::<f64, D>::zeros_generic(rows, cols);
    let k = rhs.len() - 1;
    rhs[k] = 1.0;
    let t = m.lu().solve(&rhs)?;
    let norm = t.norm();
    (norm.is_finite() && norm > 0.0).then(|| t / norm)
}

/// `t` normalised, unless its norm is at most `relative * scale` (or not a number): a null
/// vector computed by cofactors is degenerate there.
pub(crate) fn unit_null_vector<D: Dim>(
    t: OVector<f64, D>,
    scale: f64,
    relative: f64,
) -> Option<OVector<f64, D>>
where
    DefaultAllocator: Allocator<D>,
{
    (t.norm().partial_cmp(&(relative * scale.max(1e-300))) == Some(std::cmp::Ordering::Greater))
        .then(|| t.normalize())
}

/// Bisection along the arclength sigma in [0, `sigma1`] for a sign change of a test function
/// g with g(0) = `g0`: `at(sigma)` corrects the point at sigma and gives it with its g
/// (`None`: the corrector failed there, and the last point found is the answer). It stops after
/// `steps`, at g = 0 or where `stop(g)`, or when the interval is shorter than 1e-14.
pub(crate) fn bisect_arclength<Y, E>(
    sigma1: f64,
    g0: f64,
    steps: usize,
    mut at: impl FnMut(f64) -> Result<Option<(Y, f64)>, E>,
    stop: impl Fn(f64) -> bool,
) -> Result<Option<Y>, E> {
    let (mut lo, mut hi) = (0.0, sigma1);
    let mut g_lo = g0;
    let mut best = None;
    for _ in 0..steps {
        let mid = 0.5 * (lo + hi);
        let Some((ym, gm)) = at(mid)? else {
            return Ok(best);
        };
        best = Some(ym);
        if gm == 0.0 || stop(gm) {
            break;
        }
        if gm * g_lo < 0.0 {
            hi = mid;
        } else {
            lo = mid;
            g_lo = gm;
        }
        if (hi - lo).abs() < 1e-14 {
            break;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector, Matrix2, Vector2};

    /// The unit circle G(x, y) = x^2 + y^2 - 1 cut by the line x = c.
    fn circle(c: f64) -> Option<Vector2<f64>> {
        let bordered = |y: &Vector2<f64>| -> Result<Option<Bordered<nalgebra::U2>>, ()> {
            let m = Matrix2::new(2.0 * y[0], 2.0 * y[1], 0.0, 0.0);
            Ok(Some((m, Vector2::new(y.norm_squared() - 1.0, 0.0))))
        };
        let judge = |step: &Vector2<f64>, _: &Vector2<f64>| {
            if step.norm() < 1e-14 {
                Step::Converged
            } else {
                Step::Again
            }
        };
        correct(
            Vector2::new(0.5, 0.5),
            &Vector2::x(),
            c,
            30,
            bordered,
            judge,
        )
        .unwrap()
    }

    #[test]
    fn the_corrector_lands_on_the_curve_and_the_hyperplane() {
        for c in [0.0, 0.3, -0.8] {
            let y = circle(c).unwrap();
            assert!((y[0] - c).abs() < 1e-14);
            assert!((y[1] - (1.0 - c * c).sqrt()).abs() < 1e-12, "{y}");
        }
        // The hyperplane x = 2 misses the circle: Newton does not converge.
        assert!(circle(2.0).is_none());
    }

    #[test]
    fn the_bisection_finds_the_sign_change_of_the_test_function() {
        // Along the circle's arc y = (cos s, sin s) the test x - 0.6 changes sign at
        // s = acos(0.6).
        let at = |s: f64| -> Result<_, ()> { Ok(Some((s, s.cos() - 0.6))) };
        let s = bisect_arclength(1.5, 0.4, 60, at, |_| false)
            .unwrap()
            .unwrap();
        assert!((s - 0.6_f64.acos()).abs() < 1e-13, "{s}");
    }

    #[test]
    fn the_tangent_is_the_null_vector_oriented_along_the_previous_one() {
        // DG of the circle at (cos a, sin a) is 2 (cos a, sin a): the tangent is (-sin a, cos a).
        let a: f64 = 0.7;
        let m = DMatrix::from_row_slice(2, 2, &[2.0 * a.cos(), 2.0 * a.sin(), 0.0, 0.0]);
        let prev = DVector::from_vec(vec![0.0, -1.0]);
        let t = tangent(m, &prev).unwrap();
        assert!((t[0] - a.sin()).abs() < 1e-14 && (t[1] + a.cos()).abs() < 1e-14);
        let null = Vector2::new(-a.sin(), a.cos()) * 1e-20;
        assert!(unit_null_vector(null, 1.0, 1e-10).is_none());
        let t = unit_null_vector(null * 1e20, 1.0, 1e-10).unwrap();
        assert!((t.norm() - 1.0).abs() < 1e-15);
    }
}
