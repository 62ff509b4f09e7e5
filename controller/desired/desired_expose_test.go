package desired

import (
	"strings"
	"testing"

	webappv2 "github.com/example/webapp-operator/apis/v2"
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
			route := HTTPRoute(app, 0)
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
