package desired

import (
	"regexp"
	"strings"
	"testing"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func TestDesiredIngress(t *testing.T) {
	cases := []struct {
		name   string
		expose *webappv2.Expose
		want   []string // fragments of the JSON; none: no Ingress
	}{
		{"not exposed", nil, nil},
		{"through a gateway", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Gateway: &webappv2.GatewayRef{Name: "gw"}}, nil},
		{"one host, every path", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}}, []string{
			`"ingressClassName":"traefik"`,
			`"rules":[{"host":"a.example.com","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"shop","port":{"name":"http"}}}}]}}]`,
			`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"shop","uid":"uid-shop","controller":true,"blockOwnerDeletion":true}]`,
		}},
		{"hosts by paths, with TLS", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com", "*.b.example.com"}, Paths: []webappv2.PathPrefix{"/api", "/web/"},
			Ingress: &webappv2.IngressRef{ClassName: "nginx"}, TLS: &webappv2.ExposeTLS{SecretName: "shop-tls"}}, []string{
			`{"host":"a.example.com","http":{"paths":[{"path":"/api","pathType":"Prefix"`,
			`{"path":"/web/","pathType":"Prefix"`,
			`{"host":"*.b.example.com"`,
			`"tls":[{"hosts":["a.example.com","*.b.example.com"],"secretName":"shop-tls"}]`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.Exposed(webappv2.Expose{})
			app.Spec.Expose = tc.expose
			ing := Ingress(app)
			if tc.want == nil {
				if ing != nil {
					t.Fatalf("an Ingress: %s", apptest.JSON(t, ing))
				}
				return
			}
			got := apptest.JSON(t, ing)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\ndoes not contain\n%s", got, w)
				}
			}
		})
	}
}

func TestDesiredHTTPRoute(t *testing.T) {
	cases := []struct {
		name   string
		expose *webappv2.Expose
		want   []string
	}{
		{"not exposed", nil, nil},
		{"through an Ingress", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "x"}}, nil},
		// Every field the CRD defaults is set, so what we own compares equal after the server's defaulting.
		{"the Gateway in the WebApp's namespace, every path", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}, []string{
			`"parentRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"public"}]`,
			`"hostnames":["a.example.com"]`,
			`"rules":[{"matches":[{"path":{"type":"PathPrefix","value":"/"}}],"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]}]`,
		}},
		{"a listener of a Gateway elsewhere, two paths", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com", "b.example.com"}, Paths: []webappv2.PathPrefix{"/api", "/v2"},
			Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra", SectionName: "https"}}, []string{
			`"parentRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","namespace":"infra","name":"public","sectionName":"https"}]`,
			`"hostnames":["a.example.com","b.example.com"]`,
			`"matches":[{"path":{"type":"PathPrefix","value":"/api"}},{"path":{"type":"PathPrefix","value":"/v2"}}]`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.Exposed(webappv2.Expose{})
			app.Spec.Expose = tc.expose
			route := HTTPRoute(app, canary.Traffic{})
			if tc.want == nil {
				if route != nil {
					t.Fatalf("an HTTPRoute: %s", apptest.JSON(t, route))
				}
				return
			}
			got := apptest.JSON(t, route)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\ndoes not contain\n%s", got, w)
				}
			}
		})
	}
}

func TestCanaryTrafficInTheRoute(t *testing.T) {
	header := []webappv2.CanaryMatch{{Headers: []webappv2.CanaryHeaderMatch{{Name: "X-Canary", Value: "always"}, {Name: "User-Agent", Value: ".*Firefox.*", Type: webappv2.HeaderRegularExpression}}}}
	cookie := []webappv2.CanaryMatch{{Cookie: &webappv2.CanaryCookieMatch{Name: "canary", Value: "a.b"}}}
	canaryBackend := `"backendRefs":[{"group":"","kind":"Service","name":"shop-canary","port":8080,"weight":1}]`
	cases := []struct {
		name    string
		paths   []webappv2.PathPrefix
		traffic canary.Traffic
		want    []string // fragments of the route's JSON
		not     []string
	}{
		{"no canary: one rule, the stable Service", nil, canary.Traffic{}, []string{
			`"rules":[{"matches":[{"path":{"type":"PathPrefix","value":"/"}}],"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]}]`,
		}, []string{"shop-canary", "filters"}},
		{"a weight: both Services by it", nil, canary.Traffic{Weight: 10}, []string{
			`"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":90},{"group":"","kind":"Service","name":"shop-canary","port":8080,"weight":10}]}]`,
		}, []string{"filters"}},
		// Every header of a match, on every path prefix of expose, is one match of the canary's rule.
		{"headers, two paths: a second rule, to the canary alone", []webappv2.PathPrefix{"/api", "/web"}, canary.Traffic{Matches: header}, []string{
			`{"matches":[{"path":{"type":"PathPrefix","value":"/api"},"headers":[{"type":"Exact","name":"X-Canary","value":"always"},{"type":"RegularExpression","name":"User-Agent","value":".*Firefox.*"}]},` +
				`{"path":{"type":"PathPrefix","value":"/web"},"headers":[{"type":"Exact","name":"X-Canary","value":"always"},{"type":"RegularExpression","name":"User-Agent","value":".*Firefox.*"}]}],` + canaryBackend + `}]`,
			`"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]}`,
		}, nil},
		{"a cookie: a regular expression on the Cookie header", nil, canary.Traffic{Weight: 5, Matches: cookie}, []string{
			`"headers":[{"type":"RegularExpression","name":"Cookie","value":"^(.*;\\s*)?canary=a\\.b(\\s*;.*)?$"}]}],` + canaryBackend,
		}, nil},
		{"a mirror: a filter on expose's rule", nil, canary.Traffic{Mirror: 30}, []string{
			`"filters":[{"type":"RequestMirror","requestMirror":{"backendRef":{"group":"","kind":"Service","name":"shop-canary","port":8080},"percent":30}}],"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]}]`,
		}, nil},
		// Every request: no percent, so a gateway that mirrors but not a share (no HTTPRouteRequestPercentageMirror) can.
		{"a mirror of every request: no percent", nil, canary.Traffic{Weight: 1, Mirror: 100}, []string{
			`"filters":[{"type":"RequestMirror","requestMirror":{"backendRef":{"group":"","kind":"Service","name":"shop-canary","port":8080}}}]`,
		}, []string{"percent"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.Exposed(webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Paths: tc.paths, Gateway: &webappv2.GatewayRef{Name: "public"}})
			got := apptest.JSON(t, HTTPRoute(app, tc.traffic))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\ndoes not contain\n%s", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("%s\ncontains\n%s", got, w)
				}
			}
		})
	}
}

// TestPreviewRoute: a blue/green's preview host is its own route, to the canary's Service alone, on expose's
// Gateway and paths, while a canary runs (its preview, the switch and the promotion); never otherwise.
func TestPreviewRoute(t *testing.T) {
	running := canary.Decision{State: canary.State{Stable: "a", Canary: "b"}, Phase: canary.PhaseCanary, ReplicaWeight: 100}
	retiring := canary.Decision{State: canary.State{Stable: "a", Failed: "b"}, Phase: canary.PhaseRolledBack, ReplicaWeight: 100}
	gateway := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Paths: []webappv2.PathPrefix{"/api"}, Gateway: &webappv2.GatewayRef{Name: "public", SectionName: "http"}}
	blueGreen := func(host webappv2.Hostname) *webappv2.CanarySpec {
		return &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: host}}
	}
	cases := []struct {
		name   string
		expose *webappv2.Expose
		canary *webappv2.CanarySpec
		d      canary.Decision
		want   string // the route's JSON; "": none
	}{
		{"a blue/green under way", &gateway, blueGreen("preview.example.com"), running, `{"kind":"HTTPRoute","apiVersion":"gateway.networking.k8s.io/v1","metadata":{"name":"shop-canary","namespace":"ns",` +
			`"labels":{"app.kubernetes.io/instance":"shop","app.kubernetes.io/managed-by":"webapp-operator","app.kubernetes.io/name":"webapp"},` +
			`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"shop","uid":"uid-shop","controller":true,"blockOwnerDeletion":true}]},` +
			`"spec":{"parentRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"public","sectionName":"http"}],"hostnames":["preview.example.com"],` +
			`"rules":[{"matches":[{"path":{"type":"PathPrefix","value":"/api"}}],"backendRefs":[{"group":"","kind":"Service","name":"shop-canary","port":8080,"weight":1}]}]}}`},
		{"no canary under way", &gateway, blueGreen("preview.example.com"), canary.Decision{State: canary.State{Stable: "a"}, Phase: canary.PhaseStable}, ""},
		{"a rolled-back version's pods retiring", &gateway, blueGreen("preview.example.com"), retiring, ""},
		{"no preview host", &gateway, blueGreen(""), running, ""},
		{"steps, not a blue/green", &gateway, &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}}, running, ""},
		{"not exposed", nil, blueGreen("preview.example.com"), running, ""},
		{"behind an Ingress: a preview Ingress, no route", &webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}}, blueGreen("preview.example.com"), running, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.Exposed(webappv2.Expose{})
			app.Spec.Expose, app.Spec.Rollout.Canary = tc.expose, tc.canary
			route := PreviewRoute(app, tc.d)
			switch {
			case tc.want == "" && route != nil:
				t.Errorf("a preview route: %s", apptest.JSON(t, route))
			case tc.want != "" && route == nil:
				t.Error("no preview route")
			case tc.want != "":
				if got := apptest.JSON(t, route); got != tc.want {
					t.Errorf("got  %s\nwant %s", got, tc.want)
				}
			}
		})
	}
}

// TestPreviewIngress: behind an Ingress, a blue/green's preview host is a second Ingress of expose's class and
// paths, to the canary's Service alone, with expose's TLS Secret for the host, while a canary runs; never otherwise.
func TestPreviewIngress(t *testing.T) {
	running := canary.Decision{State: canary.State{Stable: "a", Canary: "b"}, Phase: canary.PhaseCanary, ReplicaWeight: 100}
	retiring := canary.Decision{State: canary.State{Stable: "a", Failed: "b"}, Phase: canary.PhaseRolledBack, ReplicaWeight: 100}
	wayBack := canary.Decision{State: canary.State{Stable: "a", Canary: "b", Step: 2, Reason: webappv2.ReasonRolledBackToPrevious}, Phase: canary.PhasePromoting, ReplicaWeight: 100}
	ingress := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Paths: []webappv2.PathPrefix{"/api", "/web"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}}
	withTLS := ingress
	withTLS.TLS = &webappv2.ExposeTLS{SecretName: "wildcard"}
	gateway := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
	blueGreen := func(host webappv2.Hostname) *webappv2.CanarySpec {
		return &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: host}}
	}
	meta := `{"kind":"Ingress","apiVersion":"networking.k8s.io/v1","metadata":{"name":"shop-canary","namespace":"ns",` +
		`"labels":{"app.kubernetes.io/instance":"shop","app.kubernetes.io/managed-by":"webapp-operator","app.kubernetes.io/name":"webapp"},` +
		`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"shop","uid":"uid-shop","controller":true,"blockOwnerDeletion":true}]},`
	rules := `"rules":[{"host":"preview.example.com","http":{"paths":[` +
		`{"path":"/api","pathType":"Prefix","backend":{"service":{"name":"shop-canary","port":{"name":"http"}}}},` +
		`{"path":"/web","pathType":"Prefix","backend":{"service":{"name":"shop-canary","port":{"name":"http"}}}}]}}]`
	cases := []struct {
		name   string
		expose *webappv2.Expose
		canary *webappv2.CanarySpec
		d      canary.Decision
		want   string // the Ingress's JSON; "": none
	}{
		{"a blue/green under way", &ingress, blueGreen("preview.example.com"), running, meta + `"spec":{"ingressClassName":"traefik",` + rules + `}}`},
		{"with expose's TLS Secret, for the preview host", &withTLS, blueGreen("preview.example.com"), running,
			meta + `"spec":{"ingressClassName":"traefik","tls":[{"hosts":["preview.example.com"],"secretName":"wildcard"}],` + rules + `}}`},
		{"no canary under way", &ingress, blueGreen("preview.example.com"), canary.Decision{State: canary.State{Stable: "a"}, Phase: canary.PhaseStable}, ""},
		{"a rolled-back version's pods retiring", &ingress, blueGreen("preview.example.com"), retiring, ""},
		{"the way back to the version kept warm", &ingress, blueGreen("preview.example.com"), wayBack, ""},
		{"no preview host", &ingress, blueGreen(""), running, ""},
		{"steps, not a blue/green", &ingress, &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}}, running, ""},
		{"through a Gateway: a preview route instead", &gateway, blueGreen("preview.example.com"), running, ""},
		{"not exposed", nil, blueGreen("preview.example.com"), running, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.Exposed(webappv2.Expose{})
			app.Spec.Expose, app.Spec.Rollout.Canary = tc.expose, tc.canary
			ing := PreviewIngress(app, tc.d)
			switch {
			case tc.want == "" && ing != nil:
				t.Errorf("a preview Ingress: %s", apptest.JSON(t, ing))
			case tc.want != "" && ing == nil:
				t.Error("no preview Ingress")
			case tc.want != "":
				if got := apptest.JSON(t, ing); got != tc.want {
					t.Errorf("got  %s\nwant %s", got, tc.want)
				}
			}
		})
	}
}

// TestCookieRegexp: the cookie's regular expression finds the cookie and its value among others, and nothing else,
// whether a gateway matches it anywhere in the header or against the whole of it.
func TestCookieRegexp(t *testing.T) {
	re := regexp.MustCompile(CookieRegexp(&webappv2.CanaryCookieMatch{Name: "canary", Value: "a.b+"}))
	whole := regexp.MustCompile(`^(?:` + CookieRegexp(&webappv2.CanaryCookieMatch{Name: "canary", Value: "a.b+"}) + `)$`)
	for header, want := range map[string]bool{
		"canary=a.b+":                   true,
		"x=1; canary=a.b+":              true,
		"canary=a.b+; x=1":              true,
		"x=1;canary=a.b+;y=2":           true,
		"canary=axb+":                   false,
		"canary=a.bb":                   false,
		"xcanary=a.b+":                  false,
		"canary=a.b+x":                  false,
		"canary=a.b+x; y=canary=a.b+":   false,
		"x=canary=a.b+":                 false,
		"":                              false,
		"canary-other=1; canary=a.b+ ;": true,
	} {
		if got := re.MatchString(header); got != want {
			t.Errorf("Cookie: %q: found %v, want %v", header, got, want)
		}
		if got := whole.MatchString(header); got != want {
			t.Errorf("Cookie: %q: the whole value matched %v, want %v", header, got, want)
		}
	}
}

func TestExposedURLs(t *testing.T) {
	hosts := []webappv2.Hostname{"a.example.com", "b.example.com"}
	cases := []struct {
		name   string
		expose *webappv2.Expose
		want   string
	}{
		{"not exposed", nil, ""},
		{"plain", &webappv2.Expose{Hosts: hosts, Gateway: &webappv2.GatewayRef{Name: "gw"}}, "http://a.example.com/ http://b.example.com/"},
		{"TLS, paths", &webappv2.Expose{Hosts: hosts[:1], Paths: []webappv2.PathPrefix{"/api", "/web"}, Ingress: &webappv2.IngressRef{ClassName: "x"}, TLS: &webappv2.ExposeTLS{SecretName: "s"}},
			"https://a.example.com/api https://a.example.com/web"},
	}
	for _, tc := range cases {
		app := apptest.Exposed(webappv2.Expose{})
		app.Spec.Expose = tc.expose
		if got := strings.Join(ExposedURLs(app), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
