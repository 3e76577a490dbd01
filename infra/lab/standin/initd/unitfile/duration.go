package unitfile

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var spanPart = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zµ]*)`)

var spanUnits = map[string]time.Duration{
	"": time.Second, "us": time.Microsecond, "usec": time.Microsecond, "µs": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// ParseDuration reads a systemd time span ("5", "100ms", "1min 30s",
// "infinity"); a bare number is seconds.
func ParseDuration(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	if s == "infinity" {
		return time.Duration(math.MaxInt64), nil
	}
	if s == "" {
		return 0, fmt.Errorf("empty time span")
	}
	var total time.Duration
	for s != "" {
		m := spanPart.FindStringSubmatch(s)
		if m == nil {
			return 0, fmt.Errorf("invalid time span %q", v)
		}
		unit, ok := spanUnits[m[2]]
		if !ok {
			return 0, fmt.Errorf("invalid time unit %q in %q", m[2], v)
		}
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, err
		}
		total += time.Duration(n * float64(unit))
		s = strings.TrimSpace(s[len(m[0]):])
	}
	return total, nil
}
