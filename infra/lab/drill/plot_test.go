package drill

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/impact"
)

func TestWriteSVG(t *testing.T) {
	results := []*Result{
		{Layout: "vip", Failure: impact.NewFailure(impact.FailOff, "cp-1"), Timeline: []Event{{At: 0, What: "cp-1 powered off"}, {At: 1600 * time.Millisecond, What: "API answers through the VIP (cp-2)"}}},
		{Layout: "single-ip", Failure: impact.NewFailure(impact.FailOff, "cp-1"), Timeline: []Event{{At: 0, What: "cp-1 powered off"}, {At: 12 * time.Second, What: "kubectl <still> DOWN & waiting"}}},
	}
	var buf bytes.Buffer
	if err := WriteSVG(&buf, results); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	circles := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	if circles != 4 {
		t.Errorf("%d event marks, want 4", circles)
	}
	if !strings.Contains(buf.String(), "12s") {
		t.Error("the time axis does not reach the last event")
	}
}
