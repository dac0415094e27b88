// Package rpcerr encodes JSON-RPC 2.0 error responses whose id may be
// null, as the spec wants for a request whose id is not known (a Parse
// error, a refused batch, a notification's): the go-sdk's
// jsonrpc.Response cannot carry "id": null (jsonrpc.EncodeMessage leaves
// the id out), so the HTTP and stdio transports that answer such
// messages themselves write these instead.
package rpcerr

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Response is a JSON-RPC 2.0 error response.
type Response struct {
	JSONRPC string          `json:"jsonrpc"` // always "2.0"
	ID      json.RawMessage `json:"id"`      // the request's id, or null
	Error   *jsonrpc.Error  `json:"error"`   // its code and message
}

// New returns the error response to the request of id with code and msg.
// An id that is not valid JSON (nil included) is null.
func New(id json.RawMessage, code int64, msg string) Response {
	if !json.Valid(id) {
		id = json.RawMessage("null")
	}
	return Response{JSONRPC: "2.0", ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

// Encode returns New's response as JSON, without a newline.
func Encode(id json.RawMessage, code int64, msg string) ([]byte, error) {
	return json.Marshal(New(id, code, msg))
}
