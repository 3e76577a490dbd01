package inventory

import (
	"strings"
	"time"
)

// Certificates is how long kubeadm's leaf certificates live and how early
// up renews them (kubeadm's own certificates last a year and nothing
// renews them unless an upgrade happens to).
type Certificates struct {
	// ValidityPeriod is every leaf certificate's lifetime (kubeadm v1beta4
	// certificateValidityPeriod), a Go duration such as 8760h.
	ValidityPeriod string `json:"validityPeriod" yaml:"validityPeriod"`
	// RenewBefore is how long before its expiry a certificate is renewed.
	RenewBefore string `json:"renewBefore" yaml:"renewBefore"`
}

// kubeadm's defaults: leaves for a year, CAs for ten; RKE2 renews within
// 120 days, we within 30.
const (
	DefaultCertificateValidity = "8760h"
	DefaultRenewBefore         = "720h"
	caValidity                 = 87600 * time.Hour
)

// Validity and Renewal are the parsed durations of a validated inventory.
func (c Certificates) Validity() time.Duration {
	d, _ := time.ParseDuration(c.ValidityPeriod)
	return d
}
func (c Certificates) Renewal() time.Duration { d, _ := time.ParseDuration(c.RenewBefore); return d }

func checkCertificates(ps *problems, inv *Inventory) {
	c := inv.Cluster.Certificates
	const path = "cluster.certificates"
	parse := func(field, v, example string) (time.Duration, bool) {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			ps.errorf(path+"."+field, "%q is not a duration: use hours, minutes or seconds, e.g. %s", v, example)
			return 0, false
		case d <= 0 || strings.HasPrefix(v, "-"):
			ps.errorf(path+"."+field, "%s is not positive: e.g. %s", v, example)
			return 0, false
		}
		return d, true
	}
	validity, vok := parse("validityPeriod", c.ValidityPeriod, DefaultCertificateValidity)
	renew, rok := parse("renewBefore", c.RenewBefore, DefaultRenewBefore)
	if vok && validity > caValidity {
		ps.errorf(path+".validityPeriod", "%s outlives kubeadm's CAs (%s): a leaf cannot be valid after its CA; at most %s", c.ValidityPeriod, caValidity, caValidity)
	}
	if vok && rok && renew >= validity {
		ps.errorf(path+".renewBefore", "%s is not shorter than validityPeriod %s: every up would renew every certificate; e.g. %s of %s", c.RenewBefore, c.ValidityPeriod, DefaultRenewBefore, DefaultCertificateValidity)
	}
	if vok && validity < time.Hour {
		ps.warnf(path+".validityPeriod", "certificates valid for %s expire between two ups unless up runs that often: fine for a test, not for a homelab", validity)
	}
}
