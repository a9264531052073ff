package bench

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5}
	for _, tc := range []struct {
		p, want float64
	}{{0, 1}, {50, 3}, {100, 5}, {25, 2}, {90, 4.6}} {
		if got := Percentile(s, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of an empty sample is not NaN")
	}
}

func TestSummarizeAndRatios(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	s := Summarize(xs)
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.Mean != 3 || s.IQR() != 2 {
		t.Fatalf("Summarize = %+v", s)
	}
	if xs[0] != 5 {
		t.Fatal("Summarize sorted its input")
	}
	if s.MedianLo > s.Median || s.MedianHi < s.Median {
		t.Fatalf("bootstrap interval [%v, %v] does not hold the median %v", s.MedianLo, s.MedianHi, s.Median)
	}
	r := Ratios([]float64{2, 3, 4}, []float64{1, 0, 2})
	if len(r) != 2 || r[0] != 2 || r[1] != 2 {
		t.Fatalf("Ratios = %v", r)
	}
	v, f := CDF([]float64{3, 1, 2, 4})
	if v[0] != 1 || v[3] != 4 || f[0] != 0.25 || f[3] != 1 {
		t.Fatalf("CDF = %v %v", v, f)
	}
}
