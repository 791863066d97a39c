//! The clusters of a run at every sample, their plateaus and their merges (docs/MATH.md §11).
//!
//! At each sample the tokens' tight clusters are found ([`super::clusters`]) and one row is
//! kept: t, the count, the largest cluster's fraction, the largest diameter, the smallest
//! separation of the centres and the energy (when the flow has one: the energy of docs/MATH.md §11, computed by the model).
//!
//! ```text
//! plateau: a maximal run of samples with one count c      -> {count: c, from: t_first, to: t_last}
//! merge:   the count falls from a >= 2 to b >= 1 (b < a), possibly through samples with count 0
//!          (two clusters that link while their union is still wider than theta)
//!                                                         -> {t: first sample with b, from_count: a, to_count: b}
//! ```
//!
//! A run that finds its clusters' changes between samples (`--model clusters`: the hand-over
//! to the cluster model and its merges, [`ClusterEvent`]) makes the history and the merges
//! from those events from the hand-over on, at their own times: the plateaus before it come
//! from the samples and last until the hand-over, each later plateau lasts from its event to
//! the next (the last to the last sample).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;

use serde::Serialize;

use super::clusters::{detect_clusters_in, CircleScratch, ClusterRule, Clustering};
use super::plane_clusters::{plane_clusters, PlaneScratch};
use super::{Observer, Sample, TokenSource};

/// One row of `clusters.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClusterRow {
    /// Sample time.
    pub t: f64,
    /// Number of tight clusters (0: not clustered).
    pub count: usize,
    /// Fraction of the tokens in the largest cluster.
    pub largest: Option<f64>,
    /// Largest angular diameter of a cluster.
    pub diameter: Option<f64>,
    /// Smallest angle between two centres.
    pub separation: Option<f64>,
    /// The energy of docs/MATH.md §11, where the flow is a gradient flow.
    pub energy: Option<f64>,
}

/// A time span with one cluster count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Plateau {
    /// The count.
    pub count: usize,
    /// First sample time with it.
    pub from: f64,
    /// Last sample time with it (after a hand-over: when the next plateau begins).
    pub to: f64,
}

/// A merge of clusters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Merge {
    /// The first sample time with the new count.
    pub t: f64,
    /// Count before.
    pub from_count: usize,
    /// Count after.
    pub to_count: usize,
}

/// A change of the tight clusters at its own time (not a sample's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClusterEvent {
    /// The cluster model took over from `count` tight clusters at time `t`.
    Handover {
        /// When.
        t: f64,
        /// Its number of points (the tight clusters then).
        count: usize,
    },
    /// Two or more clusters merged.
    Merge(Merge),
}

/// summary.json `clusters`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSummary {
    /// Tight clusters at the last sample (0: not clustered).
    pub count: usize,
    /// Tokens per cluster, descending.
    pub sizes: Vec<usize>,
    /// Largest angular diameter of a cluster (radians).
    pub diameter: Option<f64>,
    /// Smallest angle between two centres; null when count <= 1.
    pub separation: Option<f64>,
    /// The angle that defines "tight".
    pub threshold: f64,
    /// Plateaus in time order.
    pub history: Vec<Plateau>,
    /// Merges in time order.
    pub merges: Vec<Merge>,
    /// Why `clusters.csv` leaves the energy empty at some samples (absent when it does not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_omitted: Option<String>,
}

/// A function of the tokens (n x d row-major): the energy of a gradient flow, or why it is not
/// a finite double.
pub type EnergyFn = Box<dyn Fn(&[f64]) -> Result<f64, String> + Send + Sync>;

/// Samples whose energy was left out of `clusters.csv`: the first such time, how many, and the
/// first reason.
#[derive(Debug, Clone, PartialEq)]
struct EnergyGaps {
    from: f64,
    samples: usize,
    reason: String,
}

/// Finds the clusters at every sample; writes `clusters.csv` when asked to.
pub struct ClusterSeries {
    rule: ClusterRule,
    d: usize,
    energy: Option<EnergyFn>,
    energy_gaps: Option<EnergyGaps>,
    rows: Vec<ClusterRow>,
    last: Option<Clustering>,
    csv: Option<csv::Writer<BufWriter<File>>>,
    /// The hand-over (time, count) and the merges after it, when the run reported them.
    handover: Option<(f64, usize)>,
    event_merges: Vec<Merge>,
    /// The tokens of the sample being handed over in pieces (kept between samples).
    gathered: Vec<f64>,
    /// That sample: its index, the tokens seen, and whether its first tokens already proved it
    /// not clustered (then the pieces are counted, not kept).
    pieces: Option<(usize, usize, bool)>,
    /// A sample's clusters found from its token source ([`plane_clusters`]), until recorded.
    served: Option<(usize, Clustering)>,
    /// Scratch of [`plane_clusters`], kept between samples.
    plane: PlaneScratch,
    /// Scratch of the circle's binned partition, kept between samples.
    circle: CircleScratch,
}

impl ClusterSeries {
    /// A series for tokens in d dimensions, with the energy when given.
    pub fn new(rule: ClusterRule, d: usize, energy: Option<EnergyFn>) -> Self {
        ClusterSeries {
            rule,
            d,
            energy,
            energy_gaps: None,
            rows: Vec::new(),
            last: None,
            csv: None,
            handover: None,
            event_merges: Vec::new(),
            gathered: Vec::new(),
            pieces: None,
            served: None,
            plane: PlaneScratch::default(),
            circle: CircleScratch::default(),
        }
    }

    /// The same, streaming `clusters.csv` to `path` (header `t,count,largest,diameter,separation,energy`).
    pub fn with_csv(mut self, path: &Path) -> io::Result<Self> {
        self.csv = Some(csv::Writer::from_writer(BufWriter::new(File::create(
            path,
        )?)));
        Ok(self)
    }

    /// The rows so far.
    pub fn rows(&self) -> &[ClusterRow] {
        &self.rows
    }

    /// The clusters at the last sample.
    pub fn last(&self) -> Option<&Clustering> {
        self.last.as_ref()
    }

    /// The rule in use.
    pub fn rule(&self) -> ClusterRule {
        self.rule
    }

    /// When the cluster model took over (`--model clusters`), if it did.
    pub fn handover(&self) -> Option<f64> {
        self.handover.map(|(t, _)| t)
    }

    /// The plateaus of the run (module docs).
    pub fn history(&self) -> Vec<Plateau> {
        let Some((t_c, count)) = self.handover else {
            return plateaus(&self.rows);
        };
        let before: Vec<ClusterRow> = self.rows.iter().filter(|r| r.t < t_c).copied().collect();
        let mut out = plateaus(&before);
        let t_final = self.rows.last().map_or(t_c, |r| r.t.max(t_c));
        let steps = std::iter::once((t_c, count))
            .chain(self.event_merges.iter().map(|m| (m.t, m.to_count)));
        for (t, count) in steps {
            match out.last_mut() {
                Some(p) if p.count == count => continue,
                Some(p) => p.to = t,
                None => {}
            }
            out.push(Plateau {
                count,
                from: t,
                to: t,
            });
        }
        if let Some(p) = out.last_mut() {
            p.to = t_final;
        }
        out
    }

    /// The merges of the run (module docs).
    pub fn merges(&self) -> Vec<Merge> {
        let Some((t_c, _)) = self.handover else {
            return merges(&self.rows);
        };
        let before: Vec<ClusterRow> = self.rows.iter().filter(|r| r.t < t_c).copied().collect();
        let mut out = merges(&before);
        out.extend_from_slice(&self.event_merges);
        out
    }

    /// Records the clusters of `tokens` at time t: not clustered when its first tokens prove
    /// it ([`super::unclustered`]), else by the full detection.
    pub fn push(&mut self, t: f64, tokens: &[f64]) -> io::Result<()> {
        let n = tokens.len() / self.d.max(1);
        let c = if self.first_tokens_prove_unclustered(tokens, n) {
            Clustering::not_clustered(n, self.rule.threshold)
        } else {
            let directions = super::clusters::directions(tokens, self.d);
            detect_clusters_in(&directions, self.d, self.rule, &mut self.circle)
        };
        self.record(t, c, Some(tokens))
    }

    /// Whether the leading tokens of `tokens` (n in all) prove them not clustered. The leading
    /// sixteenth of the subset is tried first, then a quarter, then all of it: a spread-out
    /// state is proved from a few tokens (a witness among any tokens is a proof), and a state
    /// near clustering costs at most 1.3 times the whole subset's search. Not tried after a
    /// clustered sample: clusters last, a witness would rarely be found, and the full detection
    /// that follows answers the same either way (a witness only proves what it would find).
    fn first_tokens_prove_unclustered(&self, tokens: &[f64], n: usize) -> bool {
        if self.last.as_ref().is_some_and(Clustering::is_clustered) {
            return false;
        }
        let d = self.d.max(1);
        let m = super::unclustered::subset_size(d).min(tokens.len() / d);
        let subset = super::clusters::directions(&tokens[..m * d], d);
        let prove = |k: usize| {
            super::unclustered::surely_not_clustered(&subset[..k * d], d, n, self.rule.threshold)
        };
        prove(m / 16) || prove(m / 4) || prove(m)
    }

    /// Records the clustering `c` at time t, with the energy of `tokens` when given.
    fn record(&mut self, t: f64, c: Clustering, tokens: Option<&[f64]>) -> io::Result<()> {
        let energy = match tokens {
            Some(tokens) => self.energy_at(t, tokens),
            None => None,
        };
        let row = ClusterRow {
            t,
            count: c.count,
            largest: c.largest_fraction(),
            diameter: c.diameter,
            separation: c.separation,
            energy,
        };
        if let Some(w) = self.csv.as_mut() {
            w.serialize(row).map_err(io::Error::other)?;
        }
        self.rows.push(row);
        self.last = Some(c);
        Ok(())
    }

    /// The energy of `tokens` where it is a finite double; otherwise none, its reason kept.
    fn energy_at(&mut self, t: f64, tokens: &[f64]) -> Option<f64> {
        match self.energy.as_ref()?(tokens) {
            Ok(e) => Some(e),
            Err(reason) => {
                let gaps = self.energy_gaps.get_or_insert(EnergyGaps {
                    from: t,
                    samples: 0,
                    reason,
                });
                gaps.samples += 1;
                None
            }
        }
    }

    /// summary.json `clusters`, when a sample was seen.
    pub fn summary(&self) -> Option<ClusterSummary> {
        let last = self.last.as_ref()?;
        Some(ClusterSummary {
            count: last.count,
            sizes: last.sizes.clone(),
            diameter: last.diameter,
            separation: last.separation,
            threshold: self.rule.threshold,
            history: self.history(),
            merges: self.merges(),
            energy_omitted: self.energy_gaps.as_ref().map(|g| {
                format!(
                    "the energy is left empty at {} of {} samples from t = {}: {}",
                    g.samples,
                    self.rows.len(),
                    g.from,
                    g.reason
                )
            }),
        })
    }
}

impl Observer for ClusterSeries {
    fn wants_tokens(&self) -> bool {
        true
    }

    /// Pieces are kept until the sample is complete, unless the first piece's leading tokens
    /// prove the sample not clustered and no energy is wanted (then they are only counted).
    fn takes_token_pieces(&self) -> bool {
        true
    }

    fn sample_tokens(&mut self, index: usize, first: usize, rows: &[f64]) -> io::Result<()> {
        let d = self.d.max(1);
        if first == 0 {
            self.gathered.clear();
            // The number of tokens is not known yet: none of the group count (usize::MAX).
            let proved =
                self.energy.is_none() && self.first_tokens_prove_unclustered(rows, usize::MAX);
            self.pieces = Some((index, 0, proved));
        }
        if let Some((_, seen, proved)) = self.pieces.as_mut() {
            *seen += rows.len() / d;
            if !*proved {
                self.gathered.extend_from_slice(rows);
            }
        }
        Ok(())
    }

    /// Served when no energy is wanted and either the leading tokens prove the sample not
    /// clustered, or the source is a plane map whose clusters the bisection decides
    /// ([`plane_clusters`]); else the pieces come.
    fn sample_source(&mut self, index: usize, source: &dyn TokenSource) -> io::Result<bool> {
        let d = self.d.max(1);
        self.served = None;
        if self.energy.is_some() || source.d() != d {
            return Ok(false);
        }
        let n = source.n();
        let mut first = vec![0.0; super::unclustered::subset_size(d).min(n) * d];
        source.rows(0, &mut first);
        if !self.first_tokens_prove_unclustered(&first, n) {
            let found = plane_clusters(source, self.rule, &mut self.plane);
            self.served = found.map(|c| (index, c));
            if self.served.is_some() {
                self.pieces = None;
            }
            return Ok(self.served.is_some());
        }
        self.gathered.clear();
        self.pieces = Some((index, n, true));
        Ok(true)
    }

    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        if let Some(tokens) = sample.tokens {
            return self.push(sample.t, tokens);
        }
        match self.served.take() {
            Some((index, c)) if index == sample.index => return self.record(sample.t, c, None),
            _ => {}
        }
        match self.pieces.take() {
            Some((index, n, true)) if index == sample.index => {
                let c = Clustering::not_clustered(n, self.rule.threshold);
                self.record(sample.t, c, None)
            }
            Some((index, _, false)) if index == sample.index => {
                let tokens = std::mem::take(&mut self.gathered);
                let pushed = self.push(sample.t, &tokens);
                self.gathered = tokens;
                pushed
            }
            _ => Ok(()),
        }
    }

    fn clusters_event(&mut self, event: &ClusterEvent) -> io::Result<()> {
        match *event {
            ClusterEvent::Handover { t, count } => self.handover = Some((t, count)),
            ClusterEvent::Merge(m) => self.event_merges.push(m),
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        match self.csv.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

/// The plateaus of a series of rows (module docs).
pub fn plateaus(rows: &[ClusterRow]) -> Vec<Plateau> {
    let mut out: Vec<Plateau> = Vec::new();
    for r in rows {
        match out.last_mut() {
            Some(p) if p.count == r.count => p.to = r.t,
            _ => out.push(Plateau {
                count: r.count,
                from: r.t,
                to: r.t,
            }),
        }
    }
    out
}

/// The merges of a series of rows (module docs).
pub fn merges(rows: &[ClusterRow]) -> Vec<Merge> {
    let mut out = Vec::new();
    let mut current: Option<usize> = None;
    for r in rows.iter().filter(|r| r.count > 0) {
        if let Some(a) = current {
            if r.count < a {
                out.push(Merge {
                    t: r.t,
                    from_count: a,
                    to_count: r.count,
                });
            }
        }
        current = Some(r.count);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(counts: &[usize]) -> Vec<ClusterRow> {
        counts
            .iter()
            .enumerate()
            .map(|(i, &count)| ClusterRow {
                t: i as f64,
                count,
                largest: None,
                diameter: None,
                separation: None,
                energy: None,
            })
            .collect()
    }

    #[test]
    fn plateaus_and_merges_follow_the_counts() {
        let r = rows(&[0, 0, 3, 3, 3, 0, 2, 2, 1, 1]);
        let p = plateaus(&r);
        let counts: Vec<(usize, f64, f64)> = p.iter().map(|p| (p.count, p.from, p.to)).collect();
        assert_eq!(
            counts,
            vec![
                (0, 0.0, 1.0),
                (3, 2.0, 4.0),
                (0, 5.0, 5.0),
                (2, 6.0, 7.0),
                (1, 8.0, 9.0)
            ]
        );
        let m: Vec<(f64, usize, usize)> = merges(&r)
            .iter()
            .map(|m| (m.t, m.from_count, m.to_count))
            .collect();
        assert_eq!(m, vec![(6.0, 3, 2), (8.0, 2, 1)]);
        // A split (count rising) is a plateau change but no merge.
        assert!(merges(&rows(&[2, 3, 3])).is_empty());
    }

    /// n tokens on the circle: `k` tight groups of width `width` (k = 0: evenly spread).
    fn circle(n: usize, k: usize, width: f64) -> Vec<f64> {
        (0..n)
            .flat_map(|i| {
                let t = if k == 0 {
                    std::f64::consts::TAU * i as f64 / n as f64
                } else {
                    (i % k) as f64 * 1.3 + width * ((i * 7919) % 101) as f64 / 100.0
                };
                [t.cos(), t.sin()]
            })
            .collect()
    }

    #[test]
    fn pieces_give_the_rows_of_whole_samples() {
        let mut whole = ClusterSeries::new(ClusterRule::default(), 2, None);
        let mut pieces = ClusterSeries::new(ClusterRule::default(), 2, None);
        let samples = [
            circle(9000, 0, 0.0),
            circle(9000, 3, 0.02),
            circle(9000, 4, 0.3),
        ];
        for (index, tokens) in samples.iter().enumerate() {
            let order = crate::observe::order_parameters(tokens, 2);
            let sample = |tokens| Sample {
                index,
                t: index as f64,
                state: &[],
                order: &order,
                tokens,
            };
            whole.sample(&sample(Some(tokens))).unwrap();
            for (p, rows) in tokens.chunks(2 * 4000).enumerate() {
                pieces.sample_tokens(index, 4000 * p, rows).unwrap();
            }
            pieces.sample(&sample(None)).unwrap();
        }
        assert_eq!(whole.rows(), pieces.rows());
        assert_eq!(whole.summary(), pieces.summary());
        let counts: Vec<usize> = whole.rows().iter().map(|r| r.count).collect();
        // Spread (proved from its first tokens), three tight groups, four too wide ones.
        assert_eq!(counts, vec![0, 3, 0]);
    }

    #[test]
    fn each_row_is_the_full_detection_of_its_sample() {
        // Clustered, spread, clustered, too wide, clustered again, in d = 2 and d = 3: the
        // witness search skipped after a clustered sample changes no row.
        for d in [2, 3] {
            let lift = |x: Vec<f64>| -> Vec<f64> {
                if d == 2 {
                    return x;
                }
                x.chunks_exact(2).flat_map(|p| [p[0], p[1], 0.0]).collect()
            };
            let samples = [
                circle(3000, 2, 0.01),
                circle(3000, 0, 0.0),
                circle(3000, 3, 0.02),
                circle(3000, 4, 0.3),
                circle(3000, 1, 0.05),
            ]
            .map(lift);
            let mut series = ClusterSeries::new(ClusterRule::default(), d, None);
            for (t, tokens) in samples.iter().enumerate() {
                series.push(t as f64, tokens).unwrap();
            }
            for (row, tokens) in series.rows().iter().zip(&samples) {
                let c = super::super::clusters::detect_clusters(tokens, d, ClusterRule::default());
                assert_eq!((row.count, row.diameter), (c.count, c.diameter), "d = {d}");
            }
            let counts: Vec<usize> = series.rows().iter().map(|r| r.count).collect();
            assert_eq!(counts, vec![2, 0, 3, 0, 1], "d = {d}");
        }
    }

    #[test]
    fn events_between_samples_make_the_history_and_merges_after_the_hand_over() {
        let mut series = ClusterSeries::new(ClusterRule::default(), 2, None);
        series.rows = rows(&[0, 3, 1, 1])
            .into_iter()
            .map(|r| ClusterRow { t: 50.0 * r.t, ..r })
            .collect();
        let merge = |t, from_count, to_count| Merge {
            t,
            from_count,
            to_count,
        };
        for e in [
            ClusterEvent::Handover { t: 9.0, count: 5 },
            ClusterEvent::Merge(merge(10.2, 5, 3)),
            ClusterEvent::Merge(merge(82.6, 3, 1)),
        ] {
            series.clusters_event(&e).unwrap();
        }
        let history: Vec<(usize, f64, f64)> = series
            .history()
            .iter()
            .map(|p| (p.count, p.from, p.to))
            .collect();
        assert_eq!(
            history,
            vec![
                (0, 0.0, 9.0),
                (5, 9.0, 10.2),
                (3, 10.2, 82.6),
                (1, 82.6, 150.0)
            ]
        );
        assert_eq!(series.merges(), vec![merge(10.2, 5, 3), merge(82.6, 3, 1)]);
        assert_eq!(series.handover(), Some(9.0));
        // Without a hand-over the samples decide, as before.
        let mut plain = ClusterSeries::new(ClusterRule::default(), 2, None);
        plain.rows = series.rows.clone();
        assert_eq!(plain.merges(), vec![merge(100.0, 3, 1)]);
    }
}
