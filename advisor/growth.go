package advisor

// growthWindow keeps the context's growth from one step to the next, in tokens,
// over the last n steps (Config.GrowthSteps; 0: the whole session), and gives the
// largest: the hard limit's margin (Config.HardLimitFor). Its memory is n values.
type growthWindow struct {
	n      int
	recent []int // the last n growths, oldest first (n > 0)
	all    int   // the largest growth so far (n == 0)
}

// add records one step's growth (tokens; negative after a rewrite or compaction).
func (g *growthWindow) add(v int) {
	if g.n == 0 {
		g.all = max(g.all, v)
		return
	}
	if len(g.recent) == g.n {
		copy(g.recent, g.recent[1:])
		g.recent = g.recent[:g.n-1]
	}
	g.recent = append(g.recent, v)
}

// largest returns the largest growth in the window, 0 when none is positive.
func (g *growthWindow) largest() int {
	if g.n == 0 {
		return g.all
	}
	m := 0
	for _, v := range g.recent {
		m = max(m, v)
	}
	return m
}

// reset forgets every growth (a provider's compaction restarts the count).
func (g *growthWindow) reset() { g.recent, g.all = g.recent[:0], 0 }
