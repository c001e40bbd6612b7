package mongo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// MongoDB itself cannot be installed here, so the fixtures are the real
// requests of the official Go driver (go.mongodb.org/mongo-driver/v2)
// against fakeServer, a small wire-protocol server that answers the
// handshake and the commands the way mongod does (same reply shapes,
// codes and code names), recorded through l7test.Record:
//
//	GALAGO_L7_RECORD=1 go test -run TestRecord ./internal/l7/mongo/
//
// rewrites testdata/driver-*.chunks.

func TestRecord(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record the fixtures from the Go driver")
	}
	srv := startFakeServer(t)
	rec := l7test.Record(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().
		ApplyURI("mongodb://" + rec.Addr() + "/?directConnection=true&maxPoolSize=1&heartbeatFrequencyMS=500&appName=galago-fixtures").
		SetTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	db := client.Database("shop")
	orders := db.Collection("orders")
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err = orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "item", Value: "pen"}, {Key: "qty", Value: 5}})
	must("insert", err)
	_, err = orders.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "b"}, {Key: "qty", Value: 2}}, bson.D{{Key: "_id", Value: "c"}, {Key: "qty", Value: 9}}})
	must("insertMany", err)
	// a duplicate key: ok 1 with writeErrors (code 11000)
	if _, err = orders.InsertOne(ctx, bson.D{{Key: "_id", Value: "dup"}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate insert: %v", err)
	}
	_, err = orders.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: 1}}}})
	must("update", err)
	// w:majority: ok 1 with a writeConcernError (code 64)
	majority := db.Collection("orders", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if _, err = majority.UpdateOne(ctx, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: 3}}}}); err == nil {
		t.Fatal("majority update: no write concern error")
	}
	// find with batchSize 2 over 3 documents: find, then getMore
	cur, err := orders.Find(ctx, bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 1}}}}, options.Find().SetBatchSize(2))
	must("find", err)
	var docs []bson.M
	must("cursor", cur.All(ctx, &docs))
	if len(docs) != 3 {
		t.Fatalf("find: %d documents", len(docs))
	}
	agg, err := orders.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$qty"}}}}}}})
	must("aggregate", err)
	must("aggregate cursor", agg.All(ctx, &docs))
	// ok 0, a client error: an unknown pipeline stage
	if _, err = orders.Aggregate(ctx, mongo.Pipeline{{{Key: "$bogus", Value: 1}}}); err == nil {
		t.Fatal("bad aggregate succeeded")
	}
	// ok 0, a server error: the time limit exceeded
	if err = db.Collection("slow").FindOne(ctx, bson.D{}).Err(); err == nil {
		t.Fatal("slow find succeeded")
	}
	_, err = orders.DeleteOne(ctx, bson.D{{Key: "_id", Value: "c"}})
	must("delete", err)
	// the driver ignores NamespaceNotFound on drop, but it is on the wire
	must("drop", db.Collection("missing").Drop(ctx))
	// w:0: OP_MSG with moreToCome, no reply
	unack := db.Collection("events", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	_, err = unack.InsertOne(ctx, bson.D{{Key: "kind", Value: "audit"}})
	must("unacknowledged insert", err)
	must("ping", client.Ping(ctx, nil))
	time.Sleep(1200 * time.Millisecond) // a few heartbeats on the monitoring connection
	must("disconnect", client.Disconnect(ctx))

	conns := rec.Connections()
	old, _ := filepath.Glob("testdata/driver-*.chunks")
	for _, f := range old {
		os.Remove(f)
	}
	ver := "unknown"
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "go.mongodb.org/mongo-driver/v2").Output(); err == nil {
		ver = strings.TrimSpace(string(out))
	}
	n := 0
	for _, segs := range conns {
		if len(segs) == 0 {
			continue
		}
		f, err := os.Create(fmt.Sprintf("testdata/driver-%d.chunks", n))
		must("create", err)
		must("write", l7test.Write(f, fmt.Sprintf(
			"MongoDB Go driver go.mongodb.org/mongo-driver/v2 %s against fakeServer (record_test.go: mongod's reply shapes),\n"+
				"recorded through l7test.Record: insertOne, insertMany, duplicate insert (writeErrors 11000), updateOne,\n"+
				"updateOne w:majority (writeConcernError 64), find batchSize 2 + getMore, aggregate, aggregate $bogus\n"+
				"(ok 0, 40324), findOne on \"slow\" (ok 0, 50 MaxTimeMSExpired), deleteOne, drop \"missing\" (ok 0, 26),\n"+
				"insertOne w:0 (moreToCome), ping, disconnect (endSessions); the monitor streams hello (exhaust, a reply\n"+
				"every 300 ms); the RTT monitor polls hello\nconnection %d of the recording", ver, n), segs))
		f.Close()
		n++
	}
}

// startFakeServer starts a MongoDB wire-protocol server that answers like
// a standalone mongod 7.0 for the commands the recording uses.
func startFakeServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns, ids atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			id := conns.Add(1)
			go serveConn(c, id, &ids)
		}
	}()
	return ln.Addr().String()
}

func serveConn(c net.Conn, connID int32, ids *atomic.Int32) {
	defer c.Close()
	for {
		var h [16]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(h[:]))
		reqID := int32(binary.LittleEndian.Uint32(h[4:]))
		op := int32(binary.LittleEndian.Uint32(h[12:]))
		body := make([]byte, n-16)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		var cmd bson.Raw
		var seqs map[string][]bson.Raw
		moreToCome := false
		switch op {
		case opQuery:
			z := bytes.IndexByte(body[4:], 0)
			cmd = bson.Raw(body[4+z+1+8:])
		case opMsg:
			flags := binary.LittleEndian.Uint32(body)
			moreToCome = flags&flagMoreToCome != 0
			seqs = map[string][]bson.Raw{}
			for off := 4; off < len(body); {
				kind := body[off]
				off++
				size := int(binary.LittleEndian.Uint32(body[off:]))
				if kind == 0 {
					cmd = bson.Raw(body[off : off+size])
				} else {
					sec := body[off : off+size]
					z := bytes.IndexByte(sec[4:], 0)
					name := string(sec[4 : 4+z])
					for d := sec[4+z+1:]; len(d) > 0; {
						l := int(binary.LittleEndian.Uint32(d))
						seqs[name] = append(seqs[name], bson.Raw(d[:l]))
						d = d[l:]
					}
				}
				off += size
			}
		default:
			return
		}
		reply := answer(cmd, seqs, connID)
		if moreToCome {
			continue
		}
		doc, err := bson.Marshal(reply)
		if err != nil {
			panic(err)
		}
		if op == opMsg && binary.LittleEndian.Uint32(body)&flagExhaust != 0 {
			if _, err := cmd.LookupErr("maxAwaitTimeMS"); err == nil {
				// the streaming hello: replies with moreToCome, each
				// answering the previous one (as mongod's exhaust does),
				// until the driver closes the connection
				to := reqID
				for {
					id := ids.Add(1)
					out := binary.LittleEndian.AppendUint32(nil, 0)
					out = binary.LittleEndian.AppendUint32(out, uint32(id))
					out = binary.LittleEndian.AppendUint32(out, uint32(to))
					out = binary.LittleEndian.AppendUint32(out, opMsg)
					out = binary.LittleEndian.AppendUint32(out, flagMoreToCome)
					out = append(append(out, 0), doc...)
					binary.LittleEndian.PutUint32(out, uint32(len(out)))
					if _, err := c.Write(out); err != nil {
						return
					}
					to = id
					time.Sleep(300 * time.Millisecond)
				}
			}
		}
		var out []byte
		out = binary.LittleEndian.AppendUint32(out, 0)
		out = binary.LittleEndian.AppendUint32(out, uint32(ids.Add(1)))
		out = binary.LittleEndian.AppendUint32(out, uint32(reqID))
		if op == opQuery {
			out = binary.LittleEndian.AppendUint32(out, opReply)
			out = binary.LittleEndian.AppendUint32(out, 8) // AwaitCapable
			out = binary.LittleEndian.AppendUint64(out, 0)
			out = binary.LittleEndian.AppendUint32(out, 0)
			out = binary.LittleEndian.AppendUint32(out, 1)
		} else {
			out = binary.LittleEndian.AppendUint32(out, opMsg)
			out = binary.LittleEndian.AppendUint32(out, 0)
			out = append(out, 0)
		}
		out = append(out, doc...)
		binary.LittleEndian.PutUint32(out, uint32(len(out)))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func answer(cmd bson.Raw, seqs map[string][]bson.Raw, connID int32) bson.D {
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "bad command"}, {Key: "code", Value: int32(9)}, {Key: "codeName", Value: "FailedToParse"}}
	}
	name := elems[0].Key()
	coll, _ := elems[0].Value().StringValueOK()
	ok := bson.E{Key: "ok", Value: 1.0}
	fail := func(code int32, codeName, msg string) bson.D {
		return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: code}, {Key: "codeName", Value: codeName}}
	}
	cursor := func(field string, id int64, docs ...bson.D) bson.D {
		return bson.D{{Key: "cursor", Value: bson.D{{Key: field, Value: docs}, {Key: "id", Value: id}, {Key: "ns", Value: "shop." + coll}}}, ok}
	}
	switch name {
	case "hello", "isMaster", "ismaster":
		return bson.D{
			{Key: "helloOk", Value: true}, {Key: "ismaster", Value: true}, {Key: "isWritablePrimary", Value: true},
			// a topologyVersion makes the driver's monitor stream (exhaust)
			{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.ObjectID{0x65, 0x5f, 0x1a}}, {Key: "counter", Value: int64(0)}}},
			{Key: "maxBsonObjectSize", Value: int32(16777216)}, {Key: "maxMessageSizeBytes", Value: int32(48000000)},
			{Key: "maxWriteBatchSize", Value: int32(100000)}, {Key: "localTime", Value: bson.NewDateTimeFromTime(time.Unix(1700000000, 0))},
			{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}, {Key: "connectionId", Value: connID},
			{Key: "minWireVersion", Value: int32(0)}, {Key: "maxWireVersion", Value: int32(21)}, {Key: "readOnly", Value: false}, ok,
		}
	case "ping", "endSessions":
		return bson.D{ok}
	case "insert":
		docs := seqs["documents"]
		for i, d := range docs {
			if id, _ := d.Lookup("_id").StringValueOK(); id == "dup" {
				return bson.D{{Key: "n", Value: int32(i)}, {Key: "writeErrors", Value: bson.A{bson.D{
					{Key: "index", Value: int32(i)}, {Key: "code", Value: int32(11000)},
					{Key: "errmsg", Value: `E11000 duplicate key error collection: shop.orders index: _id_ dup key: { _id: "dup" }`},
				}}}, ok}
			}
		}
		return bson.D{{Key: "n", Value: int32(len(docs))}, ok}
	case "update":
		reply := bson.D{{Key: "n", Value: int32(1)}, {Key: "nModified", Value: int32(1)}}
		if w, err := cmd.LookupErr("writeConcern", "w"); err == nil && w.StringValue() == "majority" {
			reply = append(reply, bson.E{Key: "writeConcernError", Value: bson.D{
				{Key: "code", Value: int32(64)}, {Key: "codeName", Value: "WriteConcernFailed"},
				{Key: "errmsg", Value: "waiting for replication timed out"}, {Key: "errInfo", Value: bson.D{{Key: "wtimeout", Value: true}}},
			}})
		}
		return append(reply, ok)
	case "delete":
		return bson.D{{Key: "n", Value: int32(1)}, ok}
	case "find":
		if coll == "slow" {
			return fail(50, "MaxTimeMSExpired", "operation exceeded time limit")
		}
		return cursor("firstBatch", 7304329541893145723,
			bson.D{{Key: "_id", Value: "a"}, {Key: "qty", Value: 6}}, bson.D{{Key: "_id", Value: "b"}, {Key: "qty", Value: 3}})
	case "getMore":
		coll = cmd.Lookup("collection").StringValue()
		return cursor("nextBatch", 0, bson.D{{Key: "_id", Value: "c"}, {Key: "qty", Value: 9}})
	case "aggregate":
		if strings.Contains(cmd.Lookup("pipeline").String(), "$bogus") {
			return fail(40324, "Location40324", "Unrecognized pipeline stage name: '$bogus'")
		}
		return cursor("firstBatch", 0, bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: 18}})
	case "drop":
		return fail(26, "NamespaceNotFound", "ns not found")
	}
	return fail(59, "CommandNotFound", "no such command: '"+name+"'")
}
