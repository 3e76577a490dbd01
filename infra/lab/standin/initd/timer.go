package initd

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// timerState is what a running timer shows: when it fires next and when
// it last did.
type timerState struct {
	next, last time.Time
}

// stampDir is where systemd keeps Persistent= timers' last trigger times.
const stampDir = "/var/lib/systemd/timers"

func (m *Manager) stampPath(timer string) string {
	return m.Paths.Path(filepath.Join(stampDir, "stamp-"+timer))
}

// runTimer is a timer unit's supervisor: active (waiting) while it runs,
// starting its unit, as systemd queues a start job, each time a trigger
// elapses. Monotonic triggers count from init's start (OnBootSec=,
// OnStartupSec=), the timer's activation (OnActiveSec=) or the unit's last
// activation or deactivation (OnUnitActiveSec=, OnUnitInactiveSec=); a
// boot or activation trigger already past when the timer starts fires at
// once, as in systemd. A Persistent= calendar timer that missed an event
// while stopped fires at once too.
func (m *Manager) runTimer(ctx context.Context, s *service, def *unitfile.Unit, h *runHandle, started chan<- error) {
	defer close(h.done)
	t := def.Timer
	if _, err := unitfile.Load(m.Paths, t.Unit); err != nil {
		m.finish(s, "failed", "failed", "resources")
		m.logf("%s: cannot trigger %s: %v", def.Name, t.Unit, err)
		started <- err
		return
	}
	activated := time.Now()
	var last time.Time
	if t.Persistent {
		if fi, err := os.Stat(m.stampPath(def.Name)); err == nil {
			last = fi.ModTime()
		}
	}
	m.mu.Lock()
	s.timer = &timerState{last: last}
	m.mu.Unlock()
	m.setState(s, "active", "waiting")
	started <- nil
	m.logf("%s: waiting to trigger %s", def.Name, t.Unit)
	firedOnce := map[*time.Duration]bool{}
	missed := t.Persistent && !last.IsZero()
	for {
		next, once := m.nextElapse(def, activated, last, firedOnce, missed)
		m.mu.Lock()
		s.timer.next = next
		m.mu.Unlock()
		wait := time.Second // re-evaluated: the unit may start or stop meanwhile
		if !next.IsZero() && time.Until(next) < wait {
			wait = max(0, time.Until(next))
		}
		select {
		case <-ctx.Done():
			m.mu.Lock()
			s.timer = nil
			m.mu.Unlock()
			m.finish(s, "inactive", "dead", "success")
			m.logf("%s: stopped", def.Name)
			return
		case <-time.After(wait):
		}
		// A stop that came while it waited wins over the elapse: systemd
		// starts nothing for a timer it has stopped.
		if ctx.Err() != nil || next.IsZero() || time.Now().Before(next) {
			continue
		}
		if once != nil {
			firedOnce[once] = true
		}
		missed = false
		last = time.Now()
		m.mu.Lock()
		s.timer.last = last
		m.mu.Unlock()
		if t.Persistent {
			m.touchStamp(def.Name, last)
		}
		m.logf("%s: triggering %s", def.Name, t.Unit)
		if err := m.Start(t.Unit, false); err != nil {
			m.logf("%s: %v", def.Name, err)
		}
	}
}

// nextElapse is the earliest armed trigger; once names a trigger that
// fires once per boot or activation (so it is not armed again).
func (m *Manager) nextElapse(def *unitfile.Unit, activated, last time.Time, firedOnce map[*time.Duration]bool, missed bool) (next time.Time, once *time.Duration) {
	t := def.Timer
	consider := func(at time.Time, o *time.Duration) {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next, once = at, o
		}
	}
	for i := range t.OnBoot {
		if !firedOnce[&t.OnBoot[i]] {
			consider(m.booted.Add(t.OnBoot[i]), &t.OnBoot[i])
		}
	}
	for i := range t.OnStartup {
		if !firedOnce[&t.OnStartup[i]] {
			consider(m.booted.Add(t.OnStartup[i]), &t.OnStartup[i])
		}
	}
	for i := range t.OnActive {
		if !firedOnce[&t.OnActive[i]] {
			consider(activated.Add(t.OnActive[i]), &t.OnActive[i])
		}
	}
	m.mu.Lock()
	u := m.units[t.Unit]
	var unitActivated, unitDeactivated time.Time
	running := false
	if u != nil {
		unitActivated, unitDeactivated, running = u.activated, u.deactivated, u.run != nil
	}
	m.mu.Unlock()
	// As systemd does, the timer's own last trigger counts as the unit's
	// activation too: a start skipped for an unmet condition leaves the
	// unit inactive, and the timer must still fire again.
	for _, d := range t.OnUnitActive {
		if base := later(unitActivated, last); !base.IsZero() {
			consider(base.Add(d), nil)
		}
	}
	for _, d := range t.OnUnitInactive {
		if base := later(unitDeactivated, last); !base.IsZero() && !running {
			consider(base.Add(d), nil)
		}
	}
	now := time.Now()
	for _, c := range t.OnCalendar {
		if missed && unitfile.NextCalendar(c, last).Before(now) {
			consider(now, nil)
		}
		consider(unitfile.NextCalendar(c, now), nil)
	}
	return next, once
}

func (m *Manager) touchStamp(timer string, at time.Time) {
	p := m.stampPath(timer)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.logf("%s: %v", timer, err)
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		f.Close()
		err = os.Chtimes(p, at, at)
	}
	if err != nil {
		m.logf("%s: %v", timer, err)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
