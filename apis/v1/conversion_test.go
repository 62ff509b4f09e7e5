package v1_test

import (
	"flag"
	"slices"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
)

var (
	seed  = flag.Int64("conversion.seed", 0, "seed of the round-trip fuzzing (0: from the clock; printed)")
	count = flag.Int("conversion.count", 5000, "objects drawn per direction")
)

// filler draws objects the API server accepts, in the respects conversion depends on: v1's replicas and port are
// in range (the schema's minimum and default), v2's replicas is unset or in range, its ports are a non-empty list
// of distinct names and numbers in range, its autoscaling bounds in range; the reserved conversion-data
// annotation is never set by hand.
func filler(s int64) *randfill.Filler {
	return randfill.NewWithSeed(s).NilChance(0.3).NumElements(0, 3).Funcs(
		func(s *webappv1.WebAppSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Replicas = 1 + int32(c.Intn(10))
			s.Port = 1 + int32(c.Intn(65535))
		},
		func(s *webappv2.WebAppSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Replicas != nil {
				*s.Replicas = 1 + int32(c.Intn(10))
			}
			s.Ports = nil
			names := []string{"http", "web", "metrics", "grpc", "admin"}
			for i, n := range c.Perm(len(names))[:1+c.Intn(len(names))] {
				// Distinct numbers, as v2's rule wants.
				s.Ports = append(s.Ports, webappv2.Port{Name: names[n], Port: int32(1 + i*10000 + c.Intn(9999))})
			}
			if a := s.Autoscaling; a != nil {
				a.MaxReplicas = 1 + int32(c.Intn(100))
				if a.MinReplicas != nil {
					*a.MinReplicas = 1 + int32(c.Intn(int(a.MaxReplicas)))
				}
			}
			// Expose as v2 accepts it: a host, one of gateway or ingress, TLS only with an Ingress.
			if e := s.Expose; e != nil {
				e.Hosts = append(e.Hosts, "shop.example.com")
				if c.Bool() {
					e.Gateway = nil
					if e.Ingress == nil {
						e.Ingress = &webappv2.IngressRef{ClassName: "traefik"}
					}
				} else {
					e.Ingress, e.TLS = nil, nil
					if e.Gateway == nil {
						e.Gateway = &webappv2.GatewayRef{Name: "public"}
					}
				}
			}
		},
		// The webhook sets apiVersion and kind; conversion converts the rest.
		func(w *webappv1.WebApp, c randfill.Continue) { c.FillNoCustom(w); w.TypeMeta = metav1.TypeMeta{} },
		func(w *webappv2.WebApp, c randfill.Continue) { c.FillNoCustom(w); w.TypeMeta = metav1.TypeMeta{} },
		func(m *map[string]string, c randfill.Continue) {
			c.FillNoCustom(m)
			delete(*m, webappv1.ConversionDataAnnotation)
		},
	)
}

func seedOf(t *testing.T) int64 {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (go test ./apis/v1 -run %s -conversion.seed=%d)", s, t.Name(), s)
	return s
}

// TestRoundTripV1 converts random v1 WebApps to v2 and back: nothing is lost, and nothing is added (a WebApp v1
// can say whole needs no conversion data).
func TestRoundTripV1(t *testing.T) {
	f := filler(seedOf(t))
	for i := range *count {
		in := &webappv1.WebApp{}
		f.Fill(in)
		hub := &webappv2.WebApp{}
		if err := webappv1.ConvertToHub(in.DeepCopy(), hub); err != nil {
			t.Fatalf("case %d: v1 to v2: %v\n%s", i, err, dump(in))
		}
		out := &webappv1.WebApp{}
		if err := webappv1.ConvertFromHub(hub, out); err != nil {
			t.Fatalf("case %d: v2 to v1: %v\n%s", i, err, dump(in))
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("case %d: v1 -> v2 -> v1 changed the object\nin:\n%s\nout:\n%s", i, dump(in), dump(out))
		}
	}
}

// TestRoundTripV2 converts random v2 WebApps to v1 and back: what v1 cannot say travels in the annotation.
func TestRoundTripV2(t *testing.T) {
	f := filler(seedOf(t))
	for i := range *count {
		in := &webappv2.WebApp{}
		f.Fill(in)
		spoke := &webappv1.WebApp{}
		if err := webappv1.ConvertFromHub(in.DeepCopy(), spoke); err != nil {
			t.Fatalf("case %d: v2 to v1: %v\n%s", i, err, dump(in))
		}
		if spoke.Spec.Replicas < 1 || spoke.Spec.Port < 1 {
			t.Fatalf("case %d: the v1 form has replicas %d and port %d, outside v1's schema\n%s", i, spoke.Spec.Replicas, spoke.Spec.Port, dump(in))
		}
		out := &webappv2.WebApp{}
		if err := webappv1.ConvertToHub(spoke, out); err != nil {
			t.Fatalf("case %d: v1 to v2: %v\n%s", i, err, dump(spoke))
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("case %d: v2 -> v1 -> v2 changed the object\nin:\n%s\nout:\n%s", i, dump(in), dump(out))
		}
	}
}

// TestV1EditKeepsV2Fields is the v1 client's read, change and write: a v2 WebApp read as v1, its v1 fields set
// to random values, written back. The v1 fields are the client's; the v2-only ones (the other ports, an unset
// count) are kept.
func TestV1EditKeepsV2Fields(t *testing.T) {
	f := filler(seedOf(t))
	for i := range *count {
		in := &webappv2.WebApp{}
		f.Fill(in)
		spoke := &webappv1.WebApp{}
		if err := webappv1.ConvertFromHub(in.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		edited := &webappv1.WebApp{}
		f.Fill(&edited.Spec)
		spoke.Spec = edited.Spec
		out := &webappv2.WebApp{}
		if err := webappv1.ConvertToHub(spoke.DeepCopy(), out); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// v1's fields are the edit's.
		back := &webappv1.WebApp{}
		if err := webappv1.ConvertFromHub(out, back); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(spoke.Spec, back.Spec) {
			t.Fatalf("case %d: the v1 edit was not kept\nedit:\n%s\nread back:\n%s", i, dump(spoke), dump(back))
		}
		// The ports after the first, and their names, are v2's; one whose number the edit gave the primary port
		// is left out (v2 refuses two ports with one number, and the v1 client's own port wins).
		var want []webappv2.Port
		for j, p := range in.Spec.Ports {
			if j == 0 {
				p.Port = spoke.Spec.Port
			} else if p.Port == spoke.Spec.Port {
				continue
			}
			want = append(want, p)
		}
		if !slices.Equal(want, out.Spec.Ports) {
			t.Fatalf("case %d: ports %v with the edit's port %d became %v, want %v", i, in.Spec.Ports, spoke.Spec.Port, out.Spec.Ports, want)
		}
		// Expose, which v1 has no field for, is v2's.
		if !apiequality.Semantic.DeepEqual(in.Spec.Expose, out.Spec.Expose) {
			t.Fatalf("case %d: expose %+v became %+v", i, in.Spec.Expose, out.Spec.Expose)
		}
		// Autoscaling, which v1 has no field for, is v2's.
		if !apiequality.Semantic.DeepEqual(in.Spec.Autoscaling, out.Spec.Autoscaling) {
			t.Fatalf("case %d: autoscaling %+v became %+v", i, in.Spec.Autoscaling, out.Spec.Autoscaling)
		}
		// An unset count stays unset while the v1 client leaves it at 1.
		if in.Spec.Replicas == nil && spoke.Spec.Replicas == 1 && out.Spec.Replicas != nil {
			t.Fatalf("case %d: an unset replica count became %d", i, *out.Spec.Replicas)
		}
	}
}

// TestConversionDataContradicted: restored data is kept to what v2 accepts. A v1 edit that gives the primary port
// the number of another port keeps the edit and leaves that other port out; hand-set autoscaling out of range is
// dropped.
func TestConversionDataContradicted(t *testing.T) {
	in := &webappv1.WebApp{}
	in.Spec.Replicas, in.Spec.Port = 2, 9090
	in.Annotations = map[string]string{webappv1.ConversionDataAnnotation: `{"ports":[{"name":"http","port":80},{"name":"metrics","port":9090},{"name":"grpc","port":9000},{"name":"grpc","port":9001}],"autoscaling":{"maxReplicas":0}}`}
	out := &webappv2.WebApp{}
	if err := webappv1.ConvertToHub(in, out); err != nil {
		t.Fatal(err)
	}
	want := []webappv2.Port{{Name: "http", Port: 9090}, {Name: "grpc", Port: 9000}}
	if len(out.Spec.Ports) != len(want) || out.Spec.Ports[0] != want[0] || out.Spec.Ports[1] != want[1] {
		t.Errorf("ports = %v, want %v", out.Spec.Ports, want)
	}
	if out.Spec.Autoscaling != nil {
		t.Errorf("autoscaling with maxReplicas 0 kept: %+v", out.Spec.Autoscaling)
	}
}

// TestConversionDataUnreadable: a hand-set annotation that is not conversion data is dropped, and the conversion
// does not fail (the API server accepted the object, so its conversion must not fail).
func TestConversionDataUnreadable(t *testing.T) {
	for _, raw := range []string{"", "{", "[]", `{"ports":"x"}`, `{"ports":[]}`, `{"replicasUnset":"yes"}`} {
		in := &webappv1.WebApp{}
		in.Annotations = map[string]string{webappv1.ConversionDataAnnotation: raw, "team": "a"}
		in.Spec.Replicas, in.Spec.Port = 2, 8080
		out := &webappv2.WebApp{}
		if err := webappv1.ConvertToHub(in, out); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if _, ok := out.Annotations[webappv1.ConversionDataAnnotation]; ok || out.Annotations["team"] != "a" {
			t.Fatalf("%q: annotations %v", raw, out.Annotations)
		}
		if *out.Spec.Replicas != 2 || len(out.Spec.Ports) != 1 || out.Spec.Ports[0].Port != 8080 {
			t.Fatalf("%q: spec %+v", raw, out.Spec)
		}
	}
}

func dump(o any) string {
	b, err := yaml.Marshal(o)
	if err != nil {
		j, _ := json.Marshal(o)
		return string(j)
	}
	return string(b)
}
