package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Row is one line of the results table.
type Row struct {
	ID       string
	Scenario string
	Size     string
	Rate     bool   // figures are rates (Unit per second), higher is better
	Unit     string // "ms", "commits/s", "events/s"
	N        int    // samples
	Median   float64
	Min, Max float64
	P99      float64 // 0: not reported
	Target   string
	Verdict  string    // "ok", "MISS", or "" (no target)
	Baseline string    // what the raw baseline does
	Base     float64   // the baseline's median, in Unit
	Ratio    float64   // Median / Base
	CPU      cpuSample // per operation
	BaseCPU  cpuSample // the baseline's, per operation
	PeakRSS  int64     // bytes; 0: unknown
	RSSOf    string
	Note     string
}

// Report is a harness run's results and the conditions they were measured in.
type Report struct {
	Command            string
	Quick              bool
	Only               []string // the scenarios run, when not all
	Start, End         time.Time
	LoadStart, LoadEnd [3]float64
	Machine            string
	Scratch, ScratchFS string
	NATS, S3           string
	Rows               []Row
	Notes              []string
}

// stats returns the median, min, max and p99 (nearest rank) of xs.
func stats(xs []float64) (med, lo, hi, p99 float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	rank := int(math.Ceil(0.99*float64(n))) - 1
	return med, s[0], s[n-1], s[max(0, rank)]
}

// latencyRow makes a row of a latency series (milliseconds per operation)
// against its baseline series (nil: none).
func latencyRow(id, scenario, size string, s, base *series, baseline string) Row {
	r := Row{ID: id, Scenario: scenario, Size: size, Unit: "ms", N: len(s.d), Baseline: baseline}
	r.Median, r.Min, r.Max, r.P99 = stats(s.ms())
	if base != nil && len(base.d) > 0 {
		r.Base, _, _, _ = stats(base.ms())
		if r.Base > 0 {
			r.Ratio = r.Median / r.Base
		}
		r.BaseCPU = perOp(base)
	}
	r.usage(s)
	return r
}

// rateRow makes a row of a throughput series (operations per second).
func rateRow(id, scenario, size, unit string, s, base *series, baseline string) Row {
	r := Row{ID: id, Scenario: scenario, Size: size, Rate: true, Unit: unit, N: len(s.d), Baseline: baseline}
	r.Median, r.Min, r.Max, _ = stats(s.rates())
	if base != nil && len(base.d) > 0 {
		r.Base, _, _, _ = stats(base.rates())
		if r.Base > 0 {
			r.Ratio = r.Median / r.Base
		}
		r.BaseCPU = perOp(base)
	}
	r.usage(s)
	return r
}

// perOp is a series' CPU time per operation.
func perOp(s *series) cpuSample {
	n := time.Duration(s.ops())
	if n == 0 {
		return cpuSample{}
	}
	return cpuSample{s.cpu.client / n, s.cpu.nats / n, s.cpu.s3 / n}
}

func (r *Row) usage(s *series) {
	r.CPU = perOp(s)
	r.PeakRSS = s.peak
	r.RSSOf = "harness"
	if s.child {
		r.RSSOf = "child"
	}
}

// check sets the verdict: ok when pass.
func (r *Row) check(target string, pass bool) {
	r.Target = target
	r.Verdict = "MISS"
	if pass {
		r.Verdict = "ok"
	}
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func fmtCPU(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func fmtBytes(b int64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func (r Row) ratio() string {
	switch {
	case r.Ratio == 0:
		return "—"
	case r.Rate:
		return fmt.Sprintf("%.0f%%", 100*r.Ratio)
	}
	return fmt.Sprintf("%.2f×", r.Ratio)
}

func (r Row) oneLine() string {
	s := fmt.Sprintf("%s %s (%s): median %s %s [%s … %s]", r.ID, r.Scenario, r.Size, fmtNum(r.Median), r.Unit, fmtNum(r.Min), fmtNum(r.Max))
	if r.P99 > 0 {
		s += " p99 " + fmtNum(r.P99)
	}
	if r.Base > 0 {
		s += fmt.Sprintf("; raw %s %s, ratio %s", fmtNum(r.Base), r.Unit, r.ratio())
	}
	if r.Verdict != "" {
		s += "; target " + r.Target + ": " + r.Verdict
	}
	return s
}

// Markdown writes the report as a section of docs/bench-history.md.
func (rep *Report) Markdown(w io.Writer) {
	kind := "full run"
	if len(rep.Only) > 0 {
		kind = "run of " + strings.Join(rep.Only, ", ") + " only"
	}
	if rep.Quick {
		kind = "quick run (small sizes: a smoke test, not figures to compare)"
	}
	fmt.Fprintf(w, "### %s — %s\n\n", rep.Start.UTC().Format("2006-01-02 15:04 MST"), kind)
	fmt.Fprintf(w, "- Command: `%s`\n", rep.Command)
	fmt.Fprintf(w, "- Machine: %s\n", rep.Machine)
	fmt.Fprintf(w, "- Load average (1/5/15 min): %.2f %.2f %.2f at start, %.2f %.2f %.2f at end\n",
		rep.LoadStart[0], rep.LoadStart[1], rep.LoadStart[2], rep.LoadEnd[0], rep.LoadEnd[1], rep.LoadEnd[2])
	fmt.Fprintf(w, "- Duration: %s\n", rep.End.Sub(rep.Start).Round(time.Second))
	fmt.Fprintf(w, "- Scratch: %s (%s)\n", rep.Scratch, rep.ScratchFS)
	fmt.Fprintf(w, "- NATS: %s\n", rep.NATS)
	fmt.Fprintf(w, "- S3: %s\n", rep.S3)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| id | scenario | size | n | median | min | max | p99 | target | result | raw baseline (same run) | raw median | ratio | CPU/op client | nats | s3 | raw CPU/op (all) | peak RSS |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rep.Rows {
		unit := " " + r.Unit
		p99 := "—"
		if r.P99 > 0 {
			p99 = fmtNum(r.P99)
		}
		verdict := r.Verdict
		if verdict == "MISS" {
			verdict = "**MISS**"
		}
		rss := fmtBytes(r.PeakRSS)
		if r.PeakRSS > 0 && r.RSSOf == "child" {
			rss += " (child)"
		}
		base := r.Baseline
		if base == "" {
			base = "—"
		}
		baseCPU := "—"
		if r.Base > 0 {
			baseCPU = fmtCPU(r.BaseCPU.client + r.BaseCPU.nats + r.BaseCPU.s3)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.ID, r.Scenario, r.Size, r.N, fmtNum(r.Median), unit, fmtNum(r.Min), fmtNum(r.Max), p99,
			orDash(r.Target), orDash(verdict), base, fmtNum(r.Base), r.ratio(),
			fmtCPU(r.CPU.client), fmtCPU(r.CPU.nats), fmtCPU(r.CPU.s3), baseCPU, rss)
	}
	var notes []string
	for _, r := range rep.Rows {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s (%s): %s", r.ID, r.Size, r.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
	fmt.Fprintln(w)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// machine describes this machine for the report.
func machine() string {
	return fmt.Sprintf("%d CPUs (%s), %.1f GiB RAM, %s, %s %s/%s",
		runtime.NumCPU(), cpuModel(), float64(memTotal())/(1<<30), kernel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// natsServerVersion is the nats-server version this binary embeds.
func natsServerVersion() string { return "v" + server.VERSION }
