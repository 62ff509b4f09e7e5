package conversion_test

import (
	"testing"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/conversion"
	"github.com/example/webapp-operator/test/gen"
)

// BenchmarkToHub is the conversion of a v1 write of a WebApp with every v2-only field (more ports, autoscaling,
// expose), which holds them to v2's schema; BenchmarkToHubV1Only one with nothing to restore (no validation).
func BenchmarkToHub(b *testing.B) {
	for _, tc := range []struct {
		name     string
		withData bool
	}{{"v2-data", true}, {"v1-only", false}} {
		b.Run(tc.name, func(b *testing.B) {
			g := gen.New(1)
			hub, _ := g.WebAppV2("default", "web")
			hub.Spec.Ports = []webappv2.Port{{Name: "http", Port: 8080}, {Name: "metrics", Port: 9090}}
			hub.Spec.Autoscaling, hub.Spec.Expose = nil, nil
			if tc.withData {
				hub.Spec.Autoscaling, hub.Spec.Expose = g.Autoscaling(), g.Expose()
			}
			spoke := &webappv1.WebApp{}
			if err := conversion.FromHub(hub, spoke); err != nil {
				b.Fatal(err)
			}
			if !tc.withData {
				spoke.Status.ConversionData = ""
			}
			b.ResetTimer()
			for b.Loop() {
				out := &webappv2.WebApp{}
				if err := conversion.ToHub(spoke, out); err != nil {
					b.Fatal(err)
				}
				if tc.withData && out.Status.ConversionDropped != nil {
					b.Fatalf("dropped %+v", out.Status.ConversionDropped)
				}
			}
		})
	}
}

// BenchmarkFromHub is the conversion on every v1 read of a WebApp with every v2-only field.
func BenchmarkFromHub(b *testing.B) {
	g := gen.New(1)
	hub, _ := g.WebAppV2("default", "web")
	hub.Spec.Autoscaling, hub.Spec.Expose = g.Autoscaling(), g.Expose()
	for b.Loop() {
		if err := conversion.FromHub(hub, &webappv1.WebApp{}); err != nil {
			b.Fatal(err)
		}
	}
}
