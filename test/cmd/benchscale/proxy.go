package main

import (
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// reqKey is one kind of request: a verb (get, list, watch, create, apply, patch, update, delete) and a resource
// ("deployments", "webapps/status", ...).
type reqKey struct{ verb, resource string }

// counter counts the requests that pass through the proxy.
type counter struct {
	mu sync.Mutex
	m  map[reqKey]int64
}

func (c *counter) add(k reqKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[reqKey]int64{}
	}
	c.m[k]++
}

func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// counts is a snapshot of a counter.
type counts map[reqKey]int64

// minus is what happened between before and c.
func (c counts) minus(before counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "apply", "patch", "update", "delete":
		return true
	}
	return false
}

func isEvent(resource string) bool { return resource == "events" }

// total sums the requests that keep: write (writes only) and events (events only, or everything but events).
func (c counts) total(write, read, events bool) int64 {
	var n int64
	for k, v := range c {
		if isEvent(k.resource) != events {
			continue
		}
		if (write && isWrite(k.verb)) || (read && !isWrite(k.verb)) {
			n += v
		}
	}
	return n
}

// startProxy serves a plain-HTTP proxy on loopback in front of the API server of cfg (with cfg's credentials),
// counting every request by verb and resource. It is the benchmark's meter: light (one hop on loopback), and it
// sees exactly what a client sends, whatever the client's own metrics say.
func startProxy(cfg *rest.Config, cnt *counter) (string, func(), error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return "", nil, err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return "", nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { //nolint:gosec // loopback only, for a benchmark
		cnt.add(classify(r))
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

// classify names the verb and resource of an API request.
func classify(r *http.Request) reqKey {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return reqKey{strings.ToLower(r.Method), "(discovery)"}
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return reqKey{strings.ToLower(r.Method), "(discovery)"}
	}
	resource, named := rest[0], len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	verb := strings.ToLower(r.Method)
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodDelete:
		verb = "delete"
	case http.MethodPatch:
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "apply"
		} else {
			verb = "patch"
		}
	}
	return reqKey{verb, resource}
}
