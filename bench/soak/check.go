package soak

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verdryx/verdryx/bench/proc"
)

// window returns the days [from, to) the fleet's report is checked over
// after day d: the days the worker surely still holds (half the
// retention back: a day's table is rewritten by calls up to three days
// late, and kept for the retention after its first write).
func (r *runner) window(d int) (int, int) { // 0-based
	return max(0, d-r.opts.Retention/2), d + 1
}

// check compares the fleet's report over the checked window of days, from
// checkFromHour of its first day (cost-per-correct --nats --from --to),
// with the direct reduction of every segment delivered so far over the
// same window.
func (r *runner) check(ctx context.Context, day *Day) error {
	from, to := r.window(day.Day - 1)
	exact, fc, dc, err := r.compare(ctx, from, to, checkFromHour)
	if err != nil {
		return err
	}
	day.FleetCalls, day.DirectCalls, day.Exact = fc, dc, exact
	if !exact {
		r.problemf("day %d: the fleet's report of days %d (from %s) to %d (%d calls) differs from the direct reduction (%d calls)", day.Day, from+1, checkFromHour, to, fc, dc)
	}
	return nil
}

// checkFromHour is where in its first day the window of a day's check
// starts: off midnight, so the check reads a day the fleet keeps by the
// hour in part.
const checkFromHour = 7 * time.Hour

// compare runs both reports over days [from, to), from offset into the
// first.
func (r *runner) compare(ctx context.Context, from, to int, offset time.Duration) (exact bool, fleetCalls, directCalls int64, err error) {
	day := func(d int) time.Time { return r.opts.Fleet.Start.AddDate(0, 0, d) }
	win := []string{"--from", day(from).Add(offset).Format(time.RFC3339), "--to", day(to - 1).Format(time.DateOnly)}
	fleet, err := r.output(ctx, append([]string{"cost-per-correct", "--nats", r.nats, "--allow-empty"}, win...)...)
	if err != nil {
		return false, 0, 0, err
	}
	dir, err := r.windowDir(from, to)
	if err != nil {
		return false, 0, 0, err
	}
	direct, err := r.output(ctx, append([]string{"cost-per-correct", "--traces", dir, "--allow-empty"}, win...)...)
	if err != nil {
		return false, 0, 0, err
	}
	fl, dl := upToCallsRead(fleet), upToCallsRead(direct)
	fc, dc := callsRead(fleet), callsRead(direct)
	return fl != nil && slices.Equal(fl, dl) && fc == dc, fc, dc, nil
}

// windowDir returns a directory of (links to) the segments of the
// deliveries that can hold calls of days [from, to) (0-based): those of
// days from to to-1+MaxLateDays, as a call is delivered on its day or at
// most MaxLateDays later. The direct side of a check reads those only,
// so a check costs the same on day 30 as on day 10: reading every
// delivery so far made the last day's checks three times the tenth's,
// work that ran right before the takeovers they precede.
func (r *runner) windowDir(from, to int) (string, error) {
	dir := filepath.Join(r.work, "window")
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("soak: %w", err)
	}
	for _, dl := range r.delivered {
		if dl.Day >= from && dl.Day < to+MaxLateDays {
			if err := linkAll(dl.Dir, dir); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// checkDays compares each day of the window of day (0-based) alone,
// newest first (the furthest from its retention); keep records them in
// the result's DayReports (the last day's), else only a difference is
// recorded, as a problem. A difference found by a check that began once
// the day's retention could have passed on the worker's wall clock is
// inconclusive, not a problem: the simulated days run on wall time, and a
// harness running over (a loaded machine) lets the worker prune the day
// as it should.
func (r *runner) checkDays(ctx context.Context, day int, keep bool) error {
	from, to := r.window(day)
	for d := to - 1; d >= from; d-- {
		began := time.Now()
		exact, fc, dc, err := r.compare(ctx, d, d+1, 0)
		if err != nil {
			return err
		}
		late := !exact && !began.Before(r.firstDelivery(d).Add(r.retentionWall()))
		if keep {
			r.res.DayReports = append(r.res.DayReports, DayReport{Day: d + 1, FleetCalls: fc, DirectCalls: dc, Exact: exact, Inconclusive: late})
		}
		if late {
			r.log.Warn("soak: a day checked alone after its retention could have passed", "day", d+1, "checked_after_day", day+1)
			continue
		}
		if !exact {
			r.problemf("day %d alone (checked after day %d): the fleet's report (%d calls) differs from the direct reduction (%d calls)", d+1, day+1, fc, dc)
		}
	}
	return nil
}

// output runs a verdryx child to its end and returns its stdout.
func (r *runner) output(ctx context.Context, args ...string) ([]byte, error) {
	var out bytes.Buffer
	c, err := proc.SpawnCapture(r.opts.Bin, r.logs, args[0], &out, args...)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		c.Kill()
		return nil, ctx.Err()
	case <-c.Done():
	}
	if c.ExitCode() != 0 {
		return nil, fmt.Errorf("soak: verdryx %s failed (%s): %q", strings.Join(args, " "), c.Describe(), c.LastLine())
	}
	return out.Bytes(), nil
}

// upToCallsRead returns the lines of a printed report before its "calls
// read:" line (the tables: only calls in the window), nil without one.
// The line itself counts the calls outside the window too, which the
// fleet no longer holds once their days are pruned.
func upToCallsRead(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "calls read:") {
			return out
		}
		out = append(out, l)
	}
	return nil
}

// callsRead parses the "calls read: N[, outside window: M]" line of a
// printed report into the calls in the window, N-M (-1 without one).
func callsRead(b []byte) int64 {
	for _, l := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(l, "calls read: ")
		if !ok {
			continue
		}
		num := func(s string) int64 {
			f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == ')' })
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n
		}
		n := num(v)
		if _, rest, ok := strings.Cut(v, "outside window: "); ok {
			n -= num(rest)
		}
		return n
	}
	return -1
}

// firstDelivery returns when the delivery of day d (0-based) began.
func (r *runner) firstDelivery(d int) time.Time {
	for i, dl := range r.delivered {
		if dl.Day == d {
			return r.deliveredAt[i]
		}
	}
	return time.Time{}
}
