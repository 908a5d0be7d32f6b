package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	orchard "orchard.dev/sdk"
)

// httpClient is net/http's standard client over the host's wasi:http (orchard.Transport):
// the host's allow-list, timeouts and size cap apply to every request.
var httpClient = &http.Client{Transport: orchard.Transport()}

// client of the RabbitMQ management HTTP API (/api). Credentials come from the object's
// credentials Secret: url (e.g. http://127.0.0.1:15672, without /api), username and
// password of a user with the administrator tag. Its requests carry the call's context
// (obj.Context()): none outlives the call's deadline.
type client struct {
	ctx                  context.Context
	base, user, password string
}

func clientFor[S any](obj *orchard.Object[S]) (*client, error) {
	url, err := obj.Credential("url")
	if err != nil {
		return nil, err
	}
	user, err := obj.Credential("username")
	if err != nil {
		return nil, err
	}
	password, err := obj.Credential("password")
	if err != nil {
		return nil, err
	}
	return &client{obj.Context(), strings.TrimRight(url, "/") + "/api", user, password}, nil
}

// send makes one request, with body (if any) as JSON. Every status is an answer: see
// orchard.CheckResponse. The answer's body is already in memory (read by the transport).
func (c *client) send(method, path string, body any) (*http.Response, error) {
	var payload io.Reader
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			return nil, orchard.Unrecoverable("%s %s: body is not JSON: %v", method, c.base+path, err)
		}
		payload = bytes.NewReader(bytes.TrimRight(buf.Bytes(), "\n"))
	}
	req, err := http.NewRequestWithContext(c.ctx, method, c.base+path, payload)
	if err != nil {
		return nil, orchard.InvalidConfiguration("invalid URL %q: %v", c.base+path, err)
	}
	req.SetBasicAuth(c.user, c.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// An error is a *url.Error wrapping the SDK's failure (a denied host, no answer, the
	// deadline): returned as is, the host gets that failure.
	return httpClient.Do(req)
}

// get decodes the JSON at path into out; found=false on 404.
func (c *client) get(path, what string, out any) (found bool, err error) {
	resp, err := c.send("GET", path, nil)
	if err != nil {
		return false, err
	}
	if err := orchard.CheckResponse(resp, what); orchard.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, orchard.Transient("%s: reading the answer: %v", what, err)
	}
	return true, orchard.DecodeJSON(answer, out)
}

// write is a PUT or POST that must succeed.
func (c *client) write(method, path, what string, body any) error {
	resp, err := c.send(method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return orchard.CheckResponse(resp, what)
}

// remove is a DELETE that is done when the object is already gone.
func (c *client) remove(path, what string) error {
	resp, err := c.send("DELETE", path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := orchard.CheckResponse(resp, what); !orchard.IsNotFound(err) {
		return err
	}
	return nil
}

var q = orchard.PathSegment

// exchange is RabbitMQ's view of an exchange.
type exchange struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

type binding struct {
	Source        string `json:"source"`
	RoutingKey    string `json:"routing_key"`
	PropertiesKey string `json:"properties_key"`
}

type policy struct {
	Definition map[string]any `json:"definition"`
}

func (c *client) vhostExists(vhost string) (bool, error) {
	var v map[string]any
	return c.get("/vhosts/"+q(vhost), "get vhost "+vhost, &v)
}

func (c *client) exchange(vhost, name string) (*exchange, error) {
	var e exchange
	found, err := c.get("/exchanges/"+q(vhost)+"/"+q(name), "get exchange "+name, &e)
	if err != nil || !found {
		return nil, err
	}
	return &e, nil
}

func (c *client) exchanges(vhost string) ([]exchange, error) {
	var found []exchange
	_, err := c.get("/exchanges/"+q(vhost), "list exchanges of vhost "+vhost, &found)
	return found, err
}

func (c *client) putExchange(vhost, name string, body map[string]any) error {
	return c.write("PUT", "/exchanges/"+q(vhost)+"/"+q(name), "declare exchange "+name+" in vhost "+vhost, body)
}

func (c *client) deleteExchange(vhost, name string) error {
	return c.remove("/exchanges/"+q(vhost)+"/"+q(name), "delete exchange "+name)
}

// bindingsTo are the bindings whose destination is the exchange.
func (c *client) bindingsTo(vhost, name string) ([]binding, error) {
	var found []binding
	_, err := c.get("/exchanges/"+q(vhost)+"/"+q(name)+"/bindings/destination", "list bindings of exchange "+name, &found)
	return found, err
}

func (c *client) bind(vhost, source, destination, key string) error {
	return c.write("POST", "/bindings/"+q(vhost)+"/e/"+q(source)+"/e/"+q(destination),
		"bind exchange "+destination+" to "+source, map[string]any{"routing_key": key, "arguments": map[string]any{}})
}

func (c *client) unbind(vhost, source, destination, propertiesKey string) error {
	return c.remove("/bindings/"+q(vhost)+"/e/"+q(source)+"/e/"+q(destination)+"/"+q(propertiesKey),
		"unbind exchange "+destination+" from "+source)
}

func (c *client) policy(vhost, name string) (*policy, error) {
	var p policy
	found, err := c.get("/policies/"+q(vhost)+"/"+q(name), "get policy "+name, &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}

func (c *client) putPolicy(vhost, name string, body map[string]any) error {
	return c.write("PUT", "/policies/"+q(vhost)+"/"+q(name), "put policy "+name, body)
}

func (c *client) deletePolicy(vhost, name string) error {
	return c.remove("/policies/"+q(vhost)+"/"+q(name), "delete policy "+name)
}
