package unitfile

import (
	"fmt"
	"strings"
	"time"
)

// Timer is a .timer unit's [Timer] section, as far as the stand-in runs
// timers: the monotonic triggers, the named calendar events, Persistent=
// and the unit it activates.
type Timer struct {
	OnActive, OnBoot, OnStartup, OnUnitActive, OnUnitInactive []time.Duration
	// OnCalendar holds named calendar events (daily, hourly...).
	OnCalendar []string
	Persistent bool
	// Accuracy is how late systemd may fire; the stand-in fires on time,
	// which systemd's contract allows.
	Accuracy time.Duration
	// Unit is the unit activated, by default the timer's name with
	// .service.
	Unit string
}

// IsTimer reports whether the unit is a timer.
func (u *Unit) IsTimer() bool { return strings.HasSuffix(u.Name, ".timer") }

func (t *Timer) hasTrigger() bool {
	return len(t.OnActive)+len(t.OnBoot)+len(t.OnStartup)+len(t.OnUnitActive)+len(t.OnUnitInactive)+len(t.OnCalendar) > 0
}

// applyTimer merges one [Timer] setting; an empty value resets a list,
// as in systemd.
func (u *Unit) applyTimer(key, v string) error {
	t := u.Timer
	spans := map[string]*[]time.Duration{"OnActiveSec": &t.OnActive, "OnBootSec": &t.OnBoot, "OnStartupSec": &t.OnStartup,
		"OnUnitActiveSec": &t.OnUnitActive, "OnUnitInactiveSec": &t.OnUnitInactive}
	if dst, ok := spans[key]; ok {
		if v == "" {
			*dst = nil
			return nil
		}
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*dst = append(*dst, d)
		return nil
	}
	switch key {
	case "OnCalendar":
		if v == "" {
			t.OnCalendar = nil
			return nil
		}
		if _, ok := calendarPeriods[strings.ToLower(v)]; !ok {
			// systemd would parse the full calendar syntax; the stand-in
			// says so instead of firing at a wrong time.
			return fmt.Errorf("calendar specification %q is not supported by the lab's stand-in (only %s)", v, calendarNames)
		}
		t.OnCalendar = append(t.OnCalendar, strings.ToLower(v))
	case "Persistent":
		b, err := ParseBool(v)
		t.Persistent = b
		return err
	case "AccuracySec":
		return setDuration(&t.Accuracy, v)
	case "Unit":
		t.Unit = Normalize(v)
	}
	return nil
}

const calendarNames = "minutely, hourly, daily, weekly, monthly, quarterly, semiannually, yearly, annually"

// calendarPeriods are systemd's named calendar events: each is the start
// of a period of the local calendar.
var calendarPeriods = map[string]func(time.Time) time.Time{
	"minutely": func(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) },
	"hourly": func(t time.Time) time.Time {
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, t.Location()).Add(time.Hour)
	},
	"daily": func(t time.Time) time.Time {
		return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
	},
	"weekly": func(t time.Time) time.Time { // Mondays
		days := (8 - int(t.Weekday())) % 7
		if days == 0 {
			days = 7
		}
		return time.Date(t.Year(), t.Month(), t.Day()+days, 0, 0, 0, 0, t.Location())
	},
	"monthly":      func(t time.Time) time.Time { return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location()) },
	"quarterly":    func(t time.Time) time.Time { return nextMonthOf(t, 3) },
	"semiannually": func(t time.Time) time.Time { return nextMonthOf(t, 6) },
	"yearly":       func(t time.Time) time.Time { return time.Date(t.Year()+1, 1, 1, 0, 0, 0, 0, t.Location()) },
	"annually":     func(t time.Time) time.Time { return time.Date(t.Year()+1, 1, 1, 0, 0, 0, 0, t.Location()) },
}

// nextMonthOf is the first day of the next month numbered 1 + k*every.
func nextMonthOf(t time.Time, every int) time.Time {
	m := int(t.Month()) - 1
	next := (m/every + 1) * every
	return time.Date(t.Year(), time.Month(next+1), 1, 0, 0, 0, 0, t.Location())
}

// NextCalendar is the first time after t a named calendar event elapses.
func NextCalendar(name string, t time.Time) time.Time { return calendarPeriods[name](t) }
