package rpcerr

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncode(t *testing.T) {
	for _, tt := range []struct {
		id   json.RawMessage
		want string
	}{
		{nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`},
		{json.RawMessage("not json"), `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`},
		{json.RawMessage(`7`), `{"jsonrpc":"2.0","id":7,"error":{"code":-32700,"message":"m"}}`},
		{json.RawMessage(`"a"`), `{"jsonrpc":"2.0","id":"a","error":{"code":-32700,"message":"m"}}`},
	} {
		b, err := Encode(tt.id, -32700, "m")
		require.NoError(t, err)
		assert.JSONEq(t, tt.want, string(b))
	}
}
