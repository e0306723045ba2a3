package fitted

import (
	"fmt"
	"math"
	"slices"
)

// TreeOptions tune the gradient-boosted trees that Train adds to the logistic
// regression when Trees > 0 (an ensemble model, file version 2): each round fits
// one regression tree to the gradient of the log-loss of the rounds before it,
// with Newton leaf values -G/(H+L2) (G, H the sums of the rows' gradients p - y and
// hessians p(1-p) in the leaf; Chen and Guestrin, "XGBoost", KDD 2016, eq. 5),
// shrunk by Rate; splits are searched among Bins quantile thresholds per feature
// (histogram boosting, as LightGBM and scikit-learn's HistGradientBoosting do). The
// defaults are those of the probe of docs/EVALUATION.md ("the logistic regression
// averaged with trees": depth 3, rate 0.05, leaves of at least 50 rows) with the
// number of trees fit's cross-validation on ../shared/corpus chose among 50, 100,
// 150, 200 and 300: 100 (pooled AUC 0.7979, 51.3% of the oracle at 2% miss).
type TreeOptions struct {
	Trees   int     `json:"trees"`    // boosting rounds, one tree each; 0: no trees
	Depth   int     `json:"depth"`    // levels of splits per tree (a tree has at most 2^Depth leaves)
	Rate    float64 `json:"rate"`     // shrinkage: each leaf's Newton step is multiplied by it, in (0, 1]
	MinLeaf int     `json:"min_leaf"` // fewest training rows in a leaf
	L2      float64 `json:"l2"`       // penalty on leaf values, >= 0
	Bins    int     `json:"bins"`     // candidate thresholds per feature, 2 to 255
}

// DefaultTreeOptions returns Trees 100, Depth 3, Rate 0.05, MinLeaf 50, L2 1 and
// Bins 64.
func DefaultTreeOptions() TreeOptions {
	return TreeOptions{Trees: 100, Depth: 3, Rate: 0.05, MinLeaf: 50, L2: 1, Bins: 64}
}

// Validate checks the options' ranges (Trees 0 needs nothing else). Errors wrap
// ErrModel and name the field.
func (o TreeOptions) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: trees: %s %v, want %s", ErrModel, field, v, want)
	}
	switch {
	case o.Trees < 0:
		return bad("trees", o.Trees, ">= 0")
	case o.Trees == 0:
		return nil
	case o.Depth < 1 || o.Depth > 8:
		return bad("depth", o.Depth, "1 to 8")
	case !(o.Rate > 0 && o.Rate <= 1):
		return bad("rate", o.Rate, "in (0, 1]")
	case o.MinLeaf < 1:
		return bad("min_leaf", o.MinLeaf, ">= 1")
	case !(o.L2 >= 0) || math.IsInf(o.L2, 0):
		return bad("l2", o.L2, "a finite number >= 0")
	case o.Bins < 2 || o.Bins > 255:
		return bad("bins", o.Bins, "2 to 255")
	}
	return nil
}

// Boost is the tree half of an ensemble model: p_trees = σ(Base + Σ tree(x)) over
// the card's raw feature vector (Vector; trees need no scaling), and the model's
// keep-probability is the mean of p_trees and the regression's probability.
type Boost struct {
	Base    float64     `json:"base"`    // initial log-odds: ln(positives / negatives) of the training rows
	Options TreeOptions `json:"options"` // what the trees were grown with
	Trees   []Tree      `json:"trees"`
}

// Tree is one regression tree, its nodes in flat arrays, node 0 the root. Node i
// is a leaf when Feature[i] is -1, its log-odds step Value[i] (the rate applied);
// otherwise a vector x goes to Left[i] when x[Feature[i]] <= Threshold[i], else to
// Right[i]. Children come after their parent (Left[i], Right[i] > i), so every walk
// ends at a leaf.
type Tree struct {
	Feature   []int     `json:"feature"`
	Threshold []float64 `json:"threshold"`
	Left      []int     `json:"left"`
	Right     []int     `json:"right"`
	Value     []float64 `json:"value"`
}

// eval returns the leaf value x reaches.
func (t *Tree) eval(x []float64) float64 {
	i := 0
	for t.Feature[i] >= 0 {
		if x[t.Feature[i]] <= t.Threshold[i] {
			i = t.Left[i]
		} else {
			i = t.Right[i]
		}
	}
	return t.Value[i]
}

// logOdds returns Base plus every tree's leaf value for x.
func (b *Boost) logOdds(x []float64) float64 {
	z := b.Base
	for i := range b.Trees {
		z += b.Trees[i].eval(x)
	}
	return z
}

// validate checks every tree's shape against n features: equal array lengths,
// a feature index in [0, n) or -1, children after their parent and inside the
// tree, finite thresholds and values.
func (b *Boost) validate(n int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: boost: %s", ErrModel, fmt.Sprintf(format, args...))
	}
	if err := b.Options.Validate(); err != nil {
		return err
	}
	if b.Options.Trees < 1 || len(b.Trees) != b.Options.Trees {
		return bad("%d trees, options say %d (at least 1)", len(b.Trees), b.Options.Trees)
	}
	if math.IsNaN(b.Base) || math.IsInf(b.Base, 0) {
		return bad("base %v is not a finite number", b.Base)
	}
	for k := range b.Trees {
		t := &b.Trees[k]
		m := len(t.Feature)
		if m == 0 || len(t.Threshold) != m || len(t.Left) != m || len(t.Right) != m || len(t.Value) != m {
			return bad("trees[%d]: arrays of %d, %d, %d, %d and %d nodes, want one equal length > 0", k,
				m, len(t.Threshold), len(t.Left), len(t.Right), len(t.Value))
		}
		for i := 0; i < m; i++ {
			f := t.Feature[i]
			switch {
			case f < -1 || f >= n:
				return bad("trees[%d].feature[%d]: %d, want -1 (a leaf) or a feature index below %d", k, i, f, n)
			case f >= 0 && (t.Left[i] <= i || t.Left[i] >= m || t.Right[i] <= i || t.Right[i] >= m):
				return bad("trees[%d] node %d: children %d and %d, want nodes after it and below %d", k, i, t.Left[i], t.Right[i], m)
			case math.IsNaN(t.Threshold[i]) || math.IsInf(t.Threshold[i], 0) || math.IsNaN(t.Value[i]) || math.IsInf(t.Value[i], 0):
				return bad("trees[%d] node %d: threshold %v or value %v is not a finite number", k, i, t.Threshold[i], t.Value[i])
			}
		}
	}
	return nil
}

// grower holds one boosting run's data: n features a row, bins each row's bin per
// feature (row-major), cuts each feature's thresholds (bin k holds the values <=
// cuts[j][k] and above the cut before; the last bin the rest), g and h each row's
// gradient and hessian in the current round.
type grower struct {
	n      int
	bins   []uint8
	cuts   [][]float64
	skip   map[int]bool // features the model must not use (Options.Drop)
	g, h   []float64
	opts   TreeOptions
	hG, hH []float64 // one feature's histogram, reused
	hN     []int
}

// trainBoost grows opts.Trees trees on X (row-major, n features a row; not
// changed) and labels y, never splitting on the features in skip.
func trainBoost(X, y []float64, n int, skip map[int]bool, opts TreeOptions) *Boost {
	gr := newGrower(X, len(y), n, skip, opts)
	pos := 0.0
	for _, v := range y {
		pos += v
	}
	b := &Boost{Base: math.Log(pos / (float64(len(y)) - pos)), Options: opts}
	F := make([]float64, len(y))
	for i := range F {
		F[i] = b.Base
	}
	rows := make([]int, len(y))
	for r := 0; r < opts.Trees; r++ {
		for i := range y {
			p := sigmoid(F[i])
			gr.g[i], gr.h[i] = p-y[i], max(p*(1-p), 1e-12)
		}
		for i := range rows {
			rows[i] = i
		}
		t := &Tree{}
		gr.grow(t, rows, 0, F)
		b.Trees = append(b.Trees, *t)
	}
	return b
}

// newGrower bins X's m rows: each feature's cuts are the distinct values at its
// 1/Bins, 2/Bins, ... quantiles of the rows.
func newGrower(X []float64, m, n int, skip map[int]bool, opts TreeOptions) *grower {
	gr := &grower{n: n, bins: make([]uint8, m*n), cuts: make([][]float64, n), skip: skip,
		g: make([]float64, m), h: make([]float64, m), opts: opts,
		hG: make([]float64, opts.Bins+1), hH: make([]float64, opts.Bins+1), hN: make([]int, opts.Bins+1)}
	col := make([]float64, m)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			col[i] = X[i*n+j]
		}
		slices.Sort(col)
		var cuts []float64
		for q := 1; q < opts.Bins; q++ {
			v := col[q*m/opts.Bins]
			if v < col[m-1] && (len(cuts) == 0 || v > cuts[len(cuts)-1]) {
				cuts = append(cuts, v)
			}
		}
		gr.cuts[j] = cuts
		for i := 0; i < m; i++ {
			k, _ := slices.BinarySearch(cuts, X[i*n+j]) // first cut >= x: x <= cuts[k]
			gr.bins[i*n+j] = uint8(k)
		}
	}
	return gr
}

// grow appends the node of rows at depth to t (and its subtree), returning its
// index; a leaf adds its value to F of its rows.
func (gr *grower) grow(t *Tree, rows []int, depth int, F []float64) int {
	idx := len(t.Feature)
	t.Feature, t.Threshold, t.Left, t.Right, t.Value = append(t.Feature, -1), append(t.Threshold, 0),
		append(t.Left, 0), append(t.Right, 0), append(t.Value, 0)
	var G, H float64
	for _, i := range rows {
		G, H = G+gr.g[i], H+gr.h[i]
	}
	feat, bin := -1, 0
	if depth < gr.opts.Depth && len(rows) >= 2*gr.opts.MinLeaf {
		feat, bin = gr.bestSplit(rows, G, H)
	}
	if feat < 0 {
		v := -G / (H + gr.opts.L2) * gr.opts.Rate
		t.Value[idx] = v
		for _, i := range rows {
			F[i] += v
		}
		return idx
	}
	left := make([]int, 0, len(rows))
	right := make([]int, 0, len(rows))
	for _, i := range rows {
		if int(gr.bins[i*gr.n+feat]) <= bin {
			left = append(left, i)
		} else {
			right = append(right, i)
		}
	}
	t.Feature[idx], t.Threshold[idx] = feat, gr.cuts[feat][bin]
	l := gr.grow(t, left, depth+1, F)
	r := gr.grow(t, right, depth+1, F)
	t.Left[idx], t.Right[idx] = l, r
	return idx
}

// bestSplit returns the feature and bin (rows with bin <= it go left) of the
// split with the largest gain G_L²/(H_L+λ) + G_R²/(H_R+λ) - G²/(H+λ) that leaves
// MinLeaf rows on each side; feature -1 when none gains. Ties keep the first
// feature and bin, so the tree depends only on the rows and their order.
func (gr *grower) bestSplit(rows []int, G, H float64) (int, int) {
	l2, minLeaf := gr.opts.L2, gr.opts.MinLeaf
	parent := G * G / (H + l2)
	best, feat, bin := 1e-12, -1, 0
	for j := 0; j < gr.n; j++ {
		if gr.skip[j] || len(gr.cuts[j]) == 0 {
			continue
		}
		nb := len(gr.cuts[j]) + 1
		clear(gr.hG[:nb])
		clear(gr.hH[:nb])
		clear(gr.hN[:nb])
		for _, i := range rows {
			k := gr.bins[i*gr.n+j]
			gr.hG[k] += gr.g[i]
			gr.hH[k] += gr.h[i]
			gr.hN[k]++
		}
		var gl, hl float64
		nl := 0
		for k := 0; k < nb-1; k++ {
			gl, hl, nl = gl+gr.hG[k], hl+gr.hH[k], nl+gr.hN[k]
			if nl < minLeaf || len(rows)-nl < minLeaf {
				continue
			}
			gain := gl*gl/(hl+l2) + (G-gl)*(G-gl)/(H-hl+l2) - parent
			if gain > best {
				best, feat, bin = gain, j, k
			}
		}
	}
	return feat, bin
}
