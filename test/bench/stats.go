// Package bench measures rdma-macvlan: the endpoint life cycle at the daemon's
// socket, restart time and memory (cmd/endpoints), TCP request/response
// latency between two containers (cmd/tcprr), and turns the raw samples of
// every part, including the Docker-level ones test/bench/bench.sh takes, into
// BENCHMARKS.md and the plots under docs/ (cmd/report).
//
// This file holds the statistics they share. Benchmarks are not tests:
// nothing here asserts a time.
package bench

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Summary describes a sample of durations or rates.
type Summary struct {
	N                  int
	Min, Max           float64
	P10, P25, Median   float64
	P75, P90, P99      float64
	Mean               float64
	MedianLo, MedianHi float64 // 95% bootstrap interval of the median
}

// IQR is the interquartile range, the spread this package reports.
func (s Summary) IQR() float64 { return s.P75 - s.P25 }

// RelIQR is the IQR relative to the median (0 when the median is 0).
func (s Summary) RelIQR() float64 {
	if s.Median == 0 {
		return 0
	}
	return s.IQR() / s.Median
}

// Percentile returns the p-th percentile (0..100) of sorted, interpolating
// linearly between the closest ranks. It returns NaN for an empty sample.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n == 1 {
		return sorted[0]
	}
	r := p / 100 * float64(n-1)
	lo := int(math.Floor(r))
	hi := int(math.Ceil(r))
	if lo < 0 {
		lo = 0
	}
	if hi >= n {
		hi = n - 1
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(r-float64(lo))
}

// Summarize computes the Summary of xs (which it does not change). The
// bootstrap interval uses a fixed seed, so a report is reproducible from its
// raw samples.
func Summarize(xs []float64) Summary {
	s := slices.Clone(xs)
	slices.Sort(s)
	out := Summary{N: len(s)}
	if len(s) == 0 {
		nan := math.NaN()
		return Summary{Min: nan, Max: nan, P10: nan, P25: nan, Median: nan, P75: nan, P90: nan, P99: nan, Mean: nan, MedianLo: nan, MedianHi: nan}
	}
	out.Min, out.Max = s[0], s[len(s)-1]
	out.P10 = Percentile(s, 10)
	out.P25 = Percentile(s, 25)
	out.Median = Percentile(s, 50)
	out.P75 = Percentile(s, 75)
	out.P90 = Percentile(s, 90)
	out.P99 = Percentile(s, 99)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	out.Mean = sum / float64(len(s))
	out.MedianLo, out.MedianHi = bootstrapMedian(s, 2000)
	return out
}

// bootstrapMedian returns the 2.5th and 97.5th percentiles of the medians of
// rounds resamples of xs.
func bootstrapMedian(xs []float64, rounds int) (lo, hi float64) {
	if len(xs) < 2 {
		return xs[0], xs[0]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, rounds)
	buf := make([]float64, len(xs))
	for r := range meds {
		for i := range buf {
			buf[i] = xs[rng.IntN(len(xs))]
		}
		slices.Sort(buf)
		meds[r] = Percentile(buf, 50)
	}
	slices.Sort(meds)
	return Percentile(meds, 2.5), Percentile(meds, 97.5)
}

// Ratios divides a[i] by b[i] for paired samples; pairs where b[i] is 0 are
// skipped.
func Ratios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := range n {
		if b[i] != 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// CDF returns the sorted sample with the cumulative fraction of each point,
// for plotting distributions.
func CDF(xs []float64) (sorted, frac []float64) {
	sorted = slices.Clone(xs)
	slices.Sort(sorted)
	frac = make([]float64, len(sorted))
	for i := range sorted {
		frac[i] = float64(i+1) / float64(len(sorted))
	}
	return sorted, frac
}
