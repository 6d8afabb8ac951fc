//! Our extension "prediction": the cheapest plan over the forecast with a rescale budget.
//! Given what each vertex needs in every forecast step, the plan keeps or changes the
//! parallelism at step boundaries, never below the need, spending at most the budget of
//! rescales and paying each rescale's cost; it minimizes subtask-steps plus those costs by
//! dynamic programming over the steps. The engine acts only on its first move: rescale now
//! (and to what), or keep the current parallelism (and until when).

/// What the plan is computed from. Vectors are per vertex, then per step.
#[derive(Debug, Clone)]
pub struct PlanProblem {
    /// The current parallelism of each vertex.
    pub current: Vec<u32>,
    /// The parallelism each vertex needs in each step (already covering the lead time).
    pub need: Vec<Vec<u32>>,
    /// How many steps from now the current parallelism covers (no vertex above its band).
    pub current_covers: usize,
    /// The cost of one rescale, in subtask-steps.
    pub rescale_cost: f64,
    /// The most rescales the plan may use.
    pub budget: usize,
}

/// The plan's first move.
#[derive(Debug, Clone, PartialEq)]
pub enum FirstMove {
    /// Keep the current parallelism; the plan's next rescale (if any) is at this step, to
    /// this parallelism.
    Keep { next: Option<(usize, Vec<u32>)> },
    /// Rescale now to `level`, which covers the steps before `until` (the plan's next
    /// rescale, or the forecast's end).
    Rescale { level: Vec<u32>, until: usize },
}

/// The plan's first move, or `None` when there is nothing to plan (no steps).
pub fn first_move(p: &PlanProblem) -> Option<FirstMove> {
    let steps = p.need.iter().map(Vec::len).min().unwrap_or(0);
    if steps == 0 || p.current.len() != p.need.len() {
        return None;
    }
    // seg[i][j - i - 1]: subtask-steps of one level covering steps i..j.
    let vertices = p.need.len();
    let mut seg = vec![Vec::with_capacity(steps); steps];
    for (i, row) in seg.iter_mut().enumerate() {
        let mut level = vec![0u32; vertices];
        for j in i..steps {
            for (l, need) in level.iter_mut().zip(&p.need) {
                *l = (*l).max(need[j]);
            }
            let width = (j + 1 - i) as f64;
            row.push(level.iter().map(|l| f64::from(*l)).sum::<f64>() * width);
        }
    }
    // best[k][i]: the cheapest cover of steps i.. that starts with a rescale at i and uses
    // at most k rescales; next[k][i]: where its following rescale is (`steps`: none).
    let budget = p.budget.min(steps);
    let mut best = vec![vec![f64::INFINITY; steps + 1]; budget + 1];
    let mut next = vec![vec![steps; steps + 1]; budget + 1];
    for row in best.iter_mut() {
        row[steps] = 0.0;
    }
    for k in 1..=budget {
        for i in (0..steps).rev() {
            for j in i + 1..=steps {
                let total = p.rescale_cost + seg[i][j - i - 1] + best[k - 1][j];
                if total < best[k][i] {
                    best[k][i] = total;
                    next[k][i] = j;
                }
            }
        }
    }
    // Keeping the current parallelism for steps 0..j, then the best plan from j.
    let current: f64 = p.current.iter().map(|c| f64::from(*c)).sum();
    let mut keep = (f64::INFINITY, steps);
    let covered = p.current_covers.min(steps);
    for (j, rest) in best[budget].iter().enumerate().take(covered + 1).skip(1) {
        let total = current * j as f64 + rest;
        if total < keep.0 {
            keep = (total, j);
        }
    }
    let level_of = |i: usize, j: usize| -> Vec<u32> {
        p.need
            .iter()
            .map(|need| need[i..j].iter().copied().max().unwrap_or(0))
            .collect()
    };
    // Ties keep: a rescale must pay for itself.
    if keep.0 <= best[budget][0] {
        let j = keep.1;
        let next = (j < steps).then(|| (j, level_of(j, next[budget][j])));
        Some(FirstMove::Keep { next })
    } else {
        let until = next[budget][0];
        Some(FirstMove::Rescale {
            level: level_of(0, until),
            until,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(
        need: Vec<Vec<u32>>,
        current: Vec<u32>,
        covers: usize,
        budget: usize,
    ) -> PlanProblem {
        PlanProblem {
            current,
            need,
            current_covers: covers,
            rescale_cost: 1.0,
            budget,
        }
    }

    #[test]
    fn a_rise_within_reach_is_met_by_one_rescale_sized_for_the_peak() {
        let p = problem(vec![vec![2, 4, 6, 6, 5, 4]], vec![2], 1, 1);
        assert_eq!(
            first_move(&p),
            Some(FirstMove::Keep {
                next: Some((1, vec![6]))
            })
        );
        // Covered only now: with a budget of one the single rescale is at step 1. Not
        // covered at all: it is now, sized for everything ahead.
        let p = problem(vec![vec![4, 4, 6, 6, 5, 4]], vec![2], 0, 1);
        assert_eq!(
            first_move(&p),
            Some(FirstMove::Rescale {
                level: vec![6],
                until: 6
            })
        );
    }

    #[test]
    fn a_larger_budget_follows_the_curve_when_that_saves_more_than_it_costs() {
        let need = vec![vec![2, 2, 8, 8, 8, 8, 2, 2, 2, 2]];
        // Budget 1, not covered: one level for everything.
        let p = problem(need.clone(), vec![1], 0, 1);
        assert_eq!(
            first_move(&p),
            Some(FirstMove::Rescale {
                level: vec![8],
                until: 10
            })
        );
        // Budget 3: 2 now, 8 from step 2, 2 from step 6.
        let p = problem(need.clone(), vec![1], 0, 3);
        assert_eq!(
            first_move(&p),
            Some(FirstMove::Rescale {
                level: vec![2],
                until: 2
            })
        );
        // A rescale dearer than what it saves is not taken.
        let mut p = problem(need, vec![1], 0, 3);
        p.rescale_cost = 100.0;
        assert_eq!(
            first_move(&p),
            Some(FirstMove::Rescale {
                level: vec![8],
                until: 10
            })
        );
    }

    #[test]
    fn a_scale_down_waits_for_the_deeper_fall_when_the_budget_is_short() {
        // Falling from 8 to 1 over six steps, then flat; current 8 covers everything.
        let need = vec![vec![8, 6, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1]];
        // Budget 1: keep 8 for four steps (32), then 1 for eight (8), plus the rescale.
        let p = problem(need.clone(), vec![8], 12, 1);
        assert_eq!(
            first_move(&p),
            Some(FirstMove::Keep {
                next: Some((4, vec![1]))
            })
        );
        let p = problem(need.clone(), vec![8], 12, 2);
        match first_move(&p) {
            Some(FirstMove::Keep {
                next: Some((_, level)),
            }) => assert!(level[0] < 8),
            other => panic!("{other:?}"),
        }
        // With budget enough and cheap rescales it steps down now.
        let mut p = problem(need, vec![8], 12, 6);
        p.rescale_cost = 0.1;
        assert!(matches!(first_move(&p), Some(FirstMove::Keep { .. })));
    }

    #[test]
    fn every_level_covers_the_need_of_every_vertex() {
        let need = vec![vec![1, 3, 2, 5], vec![4, 1, 1, 1]];
        let p = problem(need, vec![1, 1], 0, 2);
        let Some(FirstMove::Rescale { level, until }) = first_move(&p) else {
            panic!("not covered now: must rescale");
        };
        assert!(level[0] >= [1, 3, 2, 5][..until].iter().copied().max().unwrap());
        assert!(level[1] >= [4, 1, 1, 1][..until].iter().copied().max().unwrap());
    }

    #[test]
    fn nothing_to_plan_without_steps() {
        assert_eq!(first_move(&problem(vec![vec![]], vec![1], 0, 4)), None);
    }
}
