package planner

import (
	"fmt"
	"testing"
)

// BenchmarkPlan prices one step with P pending prunes over a context of N messages
// (P = N/8: one output in four is pending, as in a long session over its budget),
// over budget with price_forced, so the forced rewrite and the best paying one are
// both priced: the planner's whole per-step cost. Goal (issue 9): <= 0.1 ms at 3,200
// messages and <= 1.3x growth of the whole advisor step from 100 to 3,200.
//
//	go test ./planner -run '^$' -bench BenchmarkPlan
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{100, 400, 1600, 3200} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			in := Input{Context: 150 * n, Budget: 100 * n, HardLimit: 180 * n, LowWater: 80 * n,
				LeastRewrite: 5 * n, Remaining: 10, Read: 0.3e-6, Premium: 3.45e-6, PayFactor: 2, PriceForced: true}
			for i := 0; i < n/8; i++ {
				in.Pending = append(in.Pending, Pending{Offset: 1200 * i, Saves: 400 + i%7*100, Keep: float64(i%10) / 20, Rule: i%5 == 0})
			}
			if err := in.Validate(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = Decide(in)
			}
		})
	}
}
