package conversion_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/conversion"
	"github.com/example/webapp-operator/test/gen"
)

var (
	seed  = flag.Int64("conversion.seed", 0, "seed of the round-trip fuzzing (0: from the clock; printed)")
	count = flag.Int("conversion.count", 1000, "objects drawn per direction")
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
			// v1's defaults, as the API server fills them in.
			s.ProgressDeadlineSeconds = 1 + int32(c.Intn(86400))
			s.PodSecurity = []webappv1.PodSecurity{webappv1.PodSecurityRestricted, webappv1.PodSecurityBaseline}[c.Intn(2)]
			s.Service.Type = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}[c.Intn(3)]
			s.DeletionPolicy = []webappv1.DeletionPolicy{"Delete", "Orphan"}[c.Intn(2)]
		},
		// conversionData and conversionDropped are written by conversion only.
		func(s *webappv1.WebAppStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.ConversionData, s.ConversionDropped = "", nil
		},
		func(s *webappv2.WebAppStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.ConversionDropped = nil
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
			// Autoscaling and expose as v2 accepts them (conversion holds what it restores to v2's schema).
			g := gen.New(c.Uint64())
			if s.Autoscaling != nil {
				s.Autoscaling = g.Autoscaling()
			}
			if s.Expose != nil {
				s.Expose = g.Expose()
			}
			// A canary strategy as v2 accepts it.
			if s.Rollout.Canary != nil {
				s.Rollout.Canary = g.Canary()
			}
			// The rest of the pod as v2 accepts it, or none of it.
			s.Volumes = nil
			s.Container.VolumeMounts, s.Container.ReadOnlyRootFilesystem, s.Container.WritablePaths = nil, false, nil
			s.Container.StartupProbe, s.Container.DrainSeconds = nil, 0
			s.Pod = webappv2.PodSpec{Labels: s.Pod.Labels, Annotations: s.Pod.Annotations, ImagePullSecrets: s.Pod.ImagePullSecrets, Security: s.Pod.Security}
			if c.Intn(2) == 0 {
				g.Pod(s)
			}
		},
		// The webhook sets apiVersion and kind; conversion converts the rest.
		func(w *webappv1.WebApp, c randfill.Continue) { c.FillNoCustom(w); w.TypeMeta = metav1.TypeMeta{} },
		func(w *webappv2.WebApp, c randfill.Continue) { c.FillNoCustom(w); w.TypeMeta = metav1.TypeMeta{} },
		func(m *map[string]string, c randfill.Continue) {
			c.FillNoCustom(m)
			delete(*m, conversion.LegacyDataAnnotation)
		},
	)
}

func seedOf(t *testing.T) int64 {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (go test ./conversion -run %s -conversion.seed=%d)", s, t.Name(), s)
	return s
}

// TestRoundTripV1 converts random v1 WebApps to v2 and back: nothing is lost, and nothing is added (a WebApp v1
// can say whole has empty conversion data, "{}").
func TestRoundTripV1(t *testing.T) {
	f := filler(seedOf(t))
	for i := range *count {
		in := &webappv1.WebApp{}
		f.Fill(in)
		hub := &webappv2.WebApp{}
		if err := conversion.ToHub(in.DeepCopy(), hub); err != nil {
			t.Fatalf("case %d: v1 to v2: %v\n%s", i, err, dump(in))
		}
		out := &webappv1.WebApp{}
		if err := conversion.FromHub(hub, out); err != nil {
			t.Fatalf("case %d: v2 to v1: %v\n%s", i, err, dump(in))
		}
		if out.Status.ConversionData != "{}" {
			t.Fatalf("case %d: conversion data %q for a WebApp v1 says whole\n%s", i, out.Status.ConversionData, dump(in))
		}
		out.Status.ConversionData = ""
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("case %d: v1 -> v2 -> v1 changed the object\nin:\n%s\nout:\n%s", i, dump(in), dump(out))
		}
	}
}

// TestRoundTripV2 converts random v2 WebApps to v1 and back: what v1 cannot say travels in the v1 status's
// conversionData, and nothing is dropped.
func TestRoundTripV2(t *testing.T) {
	f := filler(seedOf(t))
	for i := range *count {
		in := &webappv2.WebApp{}
		f.Fill(in)
		spoke := &webappv1.WebApp{}
		if err := conversion.FromHub(in.DeepCopy(), spoke); err != nil {
			t.Fatalf("case %d: v2 to v1: %v\n%s", i, err, dump(in))
		}
		if spoke.Spec.Replicas < 1 || spoke.Spec.Port < 1 {
			t.Fatalf("case %d: the v1 form has replicas %d and port %d, outside v1's schema\n%s", i, spoke.Spec.Replicas, spoke.Spec.Port, dump(in))
		}
		out := &webappv2.WebApp{}
		if err := conversion.ToHub(spoke, out); err != nil {
			t.Fatalf("case %d: v1 to v2: %v\n%s", i, err, dump(spoke))
		}
		if out.Status.ConversionDropped != nil {
			t.Fatalf("case %d: v2's own fields were dropped: %+v\n%s", i, out.Status.ConversionDropped, dump(in))
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
		if err := conversion.FromHub(in.DeepCopy(), spoke); err != nil {
			t.Fatal(err)
		}
		edited := &webappv1.WebApp{}
		f.Fill(&edited.Spec)
		spoke.Spec = edited.Spec
		out := &webappv2.WebApp{}
		if err := conversion.ToHub(spoke.DeepCopy(), out); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// v1's fields are the edit's.
		back := &webappv1.WebApp{}
		if err := conversion.FromHub(out, back); err != nil {
			t.Fatal(err)
		}
		defaultV1(back)
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
			t.Fatalf("case %d: autoscaling %+v became %+v %+v", i, in.Spec.Autoscaling, out.Spec.Autoscaling, out.Status.ConversionDropped)
		}
		// An unset count stays unset while the v1 client leaves it at 1; the other fields v1 defaults, while it
		// leaves them at their defaults.
		if in.Spec.Replicas == nil && spoke.Spec.Replicas == 1 && out.Spec.Replicas != nil {
			t.Fatalf("case %d: an unset replica count became %d", i, *out.Spec.Replicas)
		}
		if in.Spec.Pod.Security == "" && spoke.Spec.PodSecurity == webappv1.PodSecurityRestricted && out.Spec.Pod.Security != "" {
			t.Fatalf("case %d: an unset pod.security became %q", i, out.Spec.Pod.Security)
		}
		if in.Spec.Rollout.ProgressDeadlineSeconds == 0 && spoke.Spec.ProgressDeadlineSeconds == 600 && out.Spec.Rollout.ProgressDeadlineSeconds != 0 {
			t.Fatalf("case %d: an unset rollout.progressDeadlineSeconds became %d", i, out.Spec.Rollout.ProgressDeadlineSeconds)
		}
		if in.Spec.Service.Type == "" && spoke.Spec.Service.Type == corev1.ServiceTypeClusterIP && out.Spec.Service.Type != "" {
			t.Fatalf("case %d: an unset service.type became %q", i, out.Spec.Service.Type)
		}
	}
}

// TestUnsetStaysUnset: a v2 WebApp that leaves a field unset that v1 shows with a default reads in v1 with that
// default (the API server fills it in), and a v1 write that keeps the default leaves it unset; a v1 write that
// changes it sets it.
func TestUnsetStaysUnset(t *testing.T) {
	in := &webappv2.WebApp{Spec: webappv2.WebAppSpec{Image: "nginx:1.25", Ports: []webappv2.Port{{Name: "http", Port: 80}}, DeletionPolicy: "Delete"}}
	spoke := &webappv1.WebApp{}
	if err := conversion.FromHub(in.DeepCopy(), spoke); err != nil {
		t.Fatal(err)
	}
	// The v1 form carries v1's defaults, as the server would fill them in a v1 write (service.type only where
	// service is there: here it is not, and a v1 object without it shows none).
	if spoke.Spec.PodSecurity != webappv1.PodSecurityRestricted || spoke.Spec.ProgressDeadlineSeconds != 600 || spoke.Spec.Replicas != 1 || spoke.Spec.Service.Type != "" || spoke.Spec.Service.Annotations != nil {
		t.Fatalf("v1 form: %s", dump(spoke.Spec))
	}
	// What the API server's defaulting of v1 adds.
	withDefaults := func() *webappv1.WebApp {
		s := spoke.DeepCopy()
		s.Spec.PodSecurity, s.Spec.ProgressDeadlineSeconds, s.Spec.Service.Type = webappv1.PodSecurityRestricted, 600, corev1.ServiceTypeClusterIP
		return s
	}
	for _, tc := range []struct {
		name string
		edit func(*webappv1.WebApp)
		want func(*webappv2.WebAppSpec)
	}{
		{"a label", func(a *webappv1.WebApp) { a.Labels = map[string]string{"team": "a"} }, func(*webappv2.WebAppSpec) {}},
		{"replicas", func(a *webappv1.WebApp) { a.Spec.Replicas = 3 }, func(s *webappv2.WebAppSpec) { s.Replicas = ptr.To[int32](3) }},
		{"podSecurity", func(a *webappv1.WebApp) { a.Spec.PodSecurity = webappv1.PodSecurityBaseline }, func(s *webappv2.WebAppSpec) { s.Pod.Security = webappv2.PodSecurityBaseline }},
		{"progressDeadlineSeconds", func(a *webappv1.WebApp) { a.Spec.ProgressDeadlineSeconds = 60 }, func(s *webappv2.WebAppSpec) { s.Rollout.ProgressDeadlineSeconds = 60 }},
		{"service.type", func(a *webappv1.WebApp) { a.Spec.Service.Type = corev1.ServiceTypeNodePort }, func(s *webappv2.WebAppSpec) { s.Service.Type = corev1.ServiceTypeNodePort }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := withDefaults()
			tc.edit(edited)
			out := &webappv2.WebApp{}
			if err := conversion.ToHub(edited, out); err != nil {
				t.Fatal(err)
			}
			want := in.Spec.DeepCopy()
			tc.want(want)
			if !apiequality.Semantic.DeepEqual(*want, out.Spec) {
				t.Errorf("spec after the v1 edit:\n%s\nwant:\n%s", dump(out.Spec), dump(want))
			}
		})
	}
}

// TestConversionDataHeldToV2Schema: conversion data that v2's schema refuses (forged in the legacy annotation on a
// create, or in the status by whoever may write it) is dropped field by field, never stored, and
// status.conversionDropped names what was dropped; what passes is kept.
func TestConversionDataHeldToV2Schema(t *testing.T) {
	ports := func(n int, first int32) string {
		var p []string
		for i := range n {
			p = append(p, fmt.Sprintf(`{"name":"p%d","port":%d}`, i, first+int32(i)))
		}
		return "[" + strings.Join(p, ",") + "]"
	}
	const gw = `"gateway":{"name":"public"}`
	for _, tc := range []struct {
		name, data string
		dropped    []string
		check      func(*webappv2.WebAppSpec) bool
	}{
		{"valid data is kept", `{"ports":[{"name":"web","port":8080},{"name":"metrics","port":9090}],"autoscaling":{"maxReplicas":5},"expose":{"hosts":["a.example.com"],` + gw + `}}`,
			nil, func(s *webappv2.WebAppSpec) bool { return len(s.Ports) == 2 && s.Autoscaling != nil && s.Expose != nil }},
		{"a repeated host", `{"expose":{"hosts":["a.example.com","a.example.com"],` + gw + `}}`,
			[]string{"spec.expose"}, func(s *webappv2.WebAppSpec) bool { return s.Expose == nil }},
		{"a repeated path", `{"expose":{"hosts":["a.example.com"],"paths":["/a","/a"],` + gw + `}}`,
			[]string{"spec.expose"}, func(s *webappv2.WebAppSpec) bool { return s.Expose == nil }},
		{"an IP address as host", `{"expose":{"hosts":["10.0.0.1"],` + gw + `}}`,
			[]string{"spec.expose"}, func(s *webappv2.WebAppSpec) bool { return s.Expose == nil }},
		{"a path with '..'", `{"expose":{"hosts":["a.example.com"],"paths":["//x/../y"],` + gw + `}}`,
			[]string{"spec.expose"}, func(s *webappv2.WebAppSpec) bool { return s.Expose == nil }},
		{"both gateway and ingress", `{"expose":{"hosts":["a.example.com"],` + gw + `,"ingress":{"className":"x"}}}`,
			[]string{"spec.expose"}, func(s *webappv2.WebAppSpec) bool { return s.Expose == nil }},
		{"11 ports", `{"ports":` + ports(11, 1000) + `}`,
			[]string{"spec.ports"}, func(s *webappv2.WebAppSpec) bool {
				return len(s.Ports) == 1 && s.Ports[0] == webappv2.Port{Name: "http", Port: 8080}
			}},
		{"port 70000", `{"ports":[{"name":"http","port":80},{"name":"x","port":70000}]}`,
			[]string{"spec.ports"}, func(s *webappv2.WebAppSpec) bool { return len(s.Ports) == 1 }},
		{"a bad port name", `{"ports":[{"name":"http","port":80},{"name":"Not A Name","port":81}]}`,
			[]string{"spec.ports"}, func(s *webappv2.WebAppSpec) bool { return len(s.Ports) == 1 }},
		{"maxReplicas 1000, valid expose kept", `{"autoscaling":{"maxReplicas":1000},"expose":{"hosts":["a.example.com"],` + gw + `}}`,
			[]string{"spec.autoscaling"}, func(s *webappv2.WebAppSpec) bool { return s.Autoscaling == nil && s.Expose != nil }},
		{"minReplicas above maxReplicas", `{"autoscaling":{"minReplicas":5,"maxReplicas":2}}`,
			[]string{"spec.autoscaling"}, func(s *webappv2.WebAppSpec) bool { return s.Autoscaling == nil }},
		{"a behavior the HPA API accepts", `{"autoscaling":{"maxReplicas":5,"behavior":{"scaleUp":{"stabilizationWindowSeconds":3600,"selectPolicy":"Min","policies":[{"type":"Pods","value":1,"periodSeconds":1800}],"tolerance":"50m"},"scaleDown":{"tolerance":0}}}}`,
			nil, func(s *webappv2.WebAppSpec) bool {
				b := s.Autoscaling.Behavior
				return b.ScaleUp.Tolerance.MilliValue() == 50 && b.ScaleUp.Policies[0].PeriodSeconds == 1800 && b.ScaleDown.Tolerance.IsZero()
			}},
		{"a stabilization window of 7200 s", `{"autoscaling":{"maxReplicas":5,"behavior":{"scaleDown":{"stabilizationWindowSeconds":7200}}}}`,
			[]string{"spec.autoscaling"}, func(s *webappv2.WebAppSpec) bool { return s.Autoscaling == nil }},
		{"a policy of 0 pods per 1801 s", `{"autoscaling":{"maxReplicas":5,"behavior":{"scaleUp":{"policies":[{"type":"Pods","value":0,"periodSeconds":1801}]}}}}`,
			[]string{"spec.autoscaling"}, func(s *webappv2.WebAppSpec) bool { return s.Autoscaling == nil }},
		{"a negative tolerance", `{"autoscaling":{"maxReplicas":5,"behavior":{"scaleUp":{"tolerance":"-10m"}}}}`,
			[]string{"spec.autoscaling"}, func(s *webappv2.WebAppSpec) bool { return s.Autoscaling == nil }},
		// One directory spelled twice would be two mounts at one path: v2 takes clean paths only, whatever the route.
		{"a mount at /data beside /data/", `{"spec":{"volumes":[{"name":"a","emptyDir":{}},{"name":"b","emptyDir":{}}],"container":{"volumeMounts":[{"name":"a","mountPath":"/data"},{"name":"b","mountPath":"/data/"}]}}}`,
			[]string{"spec.container.volumeMounts"}, func(s *webappv2.WebAppSpec) bool { return len(s.Volumes) == 2 && len(s.Container.VolumeMounts) == 0 }},
		{"a writable //tmp", `{"spec":{"container":{"writablePaths":["/tmp","//tmp"]}}}`,
			[]string{"spec.container.writablePaths"}, func(s *webappv2.WebAppSpec) bool { return len(s.Container.WritablePaths) == 0 }},
		{"clean paths are kept", `{"spec":{"volumes":[{"name":"a","emptyDir":{}}],"container":{"volumeMounts":[{"name":"a","mountPath":"/var/lib/..data"}],"writablePaths":["/tmp","/var/.cache"]}}}`,
			nil, func(s *webappv2.WebAppSpec) bool {
				return len(s.Container.VolumeMounts) == 1 && len(s.Container.WritablePaths) == 2
			}},
		{"everything refused", `{"ports":` + ports(11, 1000) + `,"autoscaling":{"maxReplicas":0},"expose":{"hosts":[]}}`,
			[]string{"spec.ports", "spec.autoscaling", "spec.expose"}, func(s *webappv2.WebAppSpec) bool {
				return len(s.Ports) == 1 && s.Autoscaling == nil && s.Expose == nil
			}},
	} {
		for _, where := range []string{"status", "legacy annotation"} {
			t.Run(tc.name+" in the "+where, func(t *testing.T) {
				in := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 3}}
				in.Spec = webappv1.WebAppSpec{Image: "nginx:1.25", Replicas: 2, Port: 8080, PodSecurity: "Restricted", ProgressDeadlineSeconds: 600, DeletionPolicy: "Delete"}
				if where == "status" {
					in.Status.ConversionData = tc.data
				} else {
					in.Annotations = map[string]string{conversion.LegacyDataAnnotation: tc.data}
				}
				out := &webappv2.WebApp{}
				if err := conversion.ToHub(in, out); err != nil {
					t.Fatal(err)
				}
				if !tc.check(&out.Spec) {
					t.Errorf("spec:\n%s", dump(out.Spec))
				}
				d := out.Status.ConversionDropped
				switch {
				case tc.dropped == nil && d != nil:
					t.Errorf("dropped %+v, want nothing", d)
				case tc.dropped != nil && (d == nil || !slices.Equal(d.Fields, tc.dropped) || d.Generation != 3 || d.Message == ""):
					t.Errorf("dropped %+v, want %v at generation 3 with v2's errors", d, tc.dropped)
				case d != nil && len(d.Message) > 4096:
					t.Errorf("message of %d bytes", len(d.Message))
				}
				if _, ok := out.Annotations[conversion.LegacyDataAnnotation]; ok {
					t.Error("the legacy annotation was kept")
				}
				if d != nil {
					t.Logf("%+v", d)
				}
			})
		}
	}
}

// TestLegacyAnnotation: the annotation of releases before this one is read only where the status carries no
// conversion data (a create from an old export), and never kept.
func TestLegacyAnnotation(t *testing.T) {
	in := &webappv1.WebApp{}
	in.Spec = webappv1.WebAppSpec{Image: "nginx:1.25", Replicas: 1, Port: 80, PodSecurity: "Restricted", ProgressDeadlineSeconds: 600}
	in.Annotations = map[string]string{conversion.LegacyDataAnnotation: `{"replicasUnset":true,"autoscaling":{"maxReplicas":4}}`, "team": "a"}
	out := &webappv2.WebApp{}
	if err := conversion.ToHub(in.DeepCopy(), out); err != nil {
		t.Fatal(err)
	}
	if out.Spec.Replicas != nil || out.Spec.Autoscaling == nil || out.Spec.Autoscaling.MaxReplicas != 4 || out.Annotations["team"] != "a" || len(out.Annotations) != 1 {
		t.Errorf("from the annotation alone: %s", dump(out))
	}
	// With data in the status, the status's is the object's own: the annotation is ignored.
	in.Status.ConversionData = `{"expose":{"hosts":["a.example.com"],"gateway":{"name":"public"}}}`
	out = &webappv2.WebApp{}
	if err := conversion.ToHub(in, out); err != nil {
		t.Fatal(err)
	}
	if out.Spec.Replicas == nil || out.Spec.Autoscaling != nil || out.Spec.Expose == nil || len(out.Annotations) != 1 {
		t.Errorf("with data in the status: %s", dump(out))
	}
}

// TestConversionDataUnreadable: conversion data that cannot be read is none, and the conversion does not fail
// (the API server accepted the object, so its conversion must not fail).
func TestConversionDataUnreadable(t *testing.T) {
	for _, raw := range []string{"", "{", "[]", `{"ports":"x"}`, `{"ports":[]}`, `{"replicasUnset":"yes"}`} {
		in := &webappv1.WebApp{}
		in.Annotations = map[string]string{conversion.LegacyDataAnnotation: raw, "team": "a"}
		in.Status.ConversionData = raw
		in.Spec.Replicas, in.Spec.Port = 2, 8080
		out := &webappv2.WebApp{}
		if err := conversion.ToHub(in, out); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if _, ok := out.Annotations[conversion.LegacyDataAnnotation]; ok || out.Annotations["team"] != "a" {
			t.Fatalf("%q: annotations %v", raw, out.Annotations)
		}
		if *out.Spec.Replicas != 2 || len(out.Spec.Ports) != 1 || out.Spec.Ports[0].Port != 8080 {
			t.Fatalf("%q: spec %+v", raw, out.Spec)
		}
	}
}

// defaultV1 fills in v1's schema defaults, as the API server does when a v1 client writes the object it read.
func defaultV1(a *webappv1.WebApp) {
	s := &a.Spec
	if s.PodSecurity == "" {
		s.PodSecurity = webappv1.PodSecurityRestricted
	}
	if s.ProgressDeadlineSeconds == 0 {
		s.ProgressDeadlineSeconds = 600
	}
	if s.Service.Type == "" {
		s.Service.Type = corev1.ServiceTypeClusterIP
	}
	if s.DeletionPolicy == "" {
		s.DeletionPolicy = "Delete"
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
