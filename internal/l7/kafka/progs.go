package kafka

// The layouts this package reads, as walker programs, from Kafka's
// message definitions (clients/src/main/resources/common/message/*.json,
// cross-checked against franz-go's kmsg encoders in the tests).

type pb struct {
	p    []instr
	flex bool
}

func (b *pb) add(o op, arg int) { b.p = append(b.p, instr{op: o, arg: int16(arg)}) }

func (b *pb) skip(n int) {
	if k := len(b.p); k > 0 && b.p[k-1].op == opSkip {
		b.p[k-1].arg += int16(n) // skips only count bytes: runs merge
		return
	}
	b.add(opSkip, n)
}

func (b *pb) err()  { b.add(opErr, 0) }
func (b *pb) stop() { b.add(opStop, 0) }

// str is a (nullable) string: compact in flexible versions.
func (b *pb) str() {
	if b.flex {
		b.add(opCStr, 0)
	} else {
		b.add(opStr, 0)
	}
}

func (b *pb) name() {
	if b.flex {
		b.add(opCName, 0)
	} else {
		b.add(opName, 0)
	}
}

func (b *pb) recs() {
	if b.flex {
		b.add(opCRecs, 0)
	} else {
		b.add(opRecs, 0)
	}
}

func (b *pb) tags() {
	if b.flex {
		b.add(opTags, 0)
	}
}

func (b *pb) arr(body func()) {
	i := len(b.p)
	if b.flex {
		b.add(opCArr, 0)
	} else {
		b.add(opArr, 0)
	}
	body()
	b.add(opEnd, 0)
	b.p[i].arg = int16(len(b.p) - 1)
}

// topic wraps a topic element, so that its name (or id) is kept and
// reported.
func (b *pb) topic(body func()) {
	b.add(opTopic, 0)
	body()
	b.add(opTopicEnd, 0)
}

// topicRef is a topic's name, or from version idFrom on its id.
func (b *pb) topicRef(ver, idFrom int16) {
	if ver >= idFrom {
		b.add(opID, 0)
	} else {
		b.name()
	}
}

// reqProgram is the layout of a request after the framed 8 bytes (api
// key, version, correlation id): the rest of the header, then the parts of
// the body this package reads.
//
// With records false, a Produce request is read only up to its first
// topic (what the template needs); with records true, through every
// partition's record set (what OnTopic reports).
func reqProgram(key, ver int16, records bool) []instr {
	if key != keyProduce && key != keyFetch {
		return nil // only the header matters, and the framer has it
	}
	b := &pb{}
	b.add(opStr, 0) // client_id: never compact, even in header v2
	b.flex = flexible(key, ver)
	b.tags()
	v := ver
	switch key {
	case keyProduce:
		if v >= 3 {
			b.str() // transactional_id
		}
		b.add(opAcks, 0)
		b.skip(4) // timeout_ms
		b.arr(func() {
			if !records {
				b.topic(func() { b.topicRef(v, 13) })
				b.stop()
				return
			}
			b.topic(func() {
				b.topicRef(v, 13)
				b.arr(func() {
					b.skip(4) // partition
					b.recs()
					b.tags()
				})
				b.tags()
			})
		})
		b.tags()
	case keyFetch:
		if v <= 14 {
			b.skip(4) // replica_id
		}
		b.skip(8) // max_wait_ms, min_bytes
		if v >= 3 {
			b.skip(4) // max_bytes
		}
		if v >= 4 {
			b.skip(1) // isolation_level
		}
		if v >= 7 {
			b.skip(8) // session_id, session_epoch
		}
		b.arr(func() {
			b.topic(func() {
				b.topicRef(v, 13)
			})
			b.stop() // the first topic and the count are all the template needs
		})
	}
	return b.p
}

// respProgram is the layout of a response after its correlation id: the
// header's tagged fields, then where the body's error codes are.
func respProgram(key, ver int16) []instr {
	b := &pb{flex: respHeaderFlexible(key, ver)}
	b.tags()
	b.flex = flexible(key, ver)
	v := ver
	throttleErr := func(throttleFrom int16) {
		if v >= throttleFrom {
			b.skip(4)
		}
		b.err()
		b.stop()
	}
	switch key {
	case keyProduce:
		b.arr(func() {
			b.topic(func() {
				b.topicRef(v, 13)
				b.arr(func() {
					b.skip(4) // partition
					b.err()
					b.skip(8) // base_offset
					if v >= 2 {
						b.skip(8) // log_append_time_ms
					}
					if v >= 5 {
						b.skip(8) // log_start_offset
					}
					if v >= 8 {
						b.arr(func() { // record_errors
							b.skip(4)
							b.str()
							b.tags()
						})
						b.str() // error_message
					}
					b.tags()
				})
				b.tags()
			})
		})
		if v >= 1 {
			b.skip(4) // throttle_time_ms
		}
		b.tags()
	case keyFetch:
		if v >= 1 {
			b.skip(4)
		}
		if v >= 7 {
			b.err()
			b.skip(4) // session_id
		}
		b.arr(func() {
			b.topic(func() {
				b.topicRef(v, 13)
				b.arr(func() {
					b.skip(4) // partition_index
					b.err()
					b.skip(8) // high_watermark
					if v >= 4 {
						b.skip(8) // last_stable_offset
					}
					if v >= 5 {
						b.skip(8) // log_start_offset
					}
					if v >= 4 {
						b.arr(func() { // aborted_transactions
							b.skip(16)
							b.tags()
						})
					}
					if v >= 11 {
						b.skip(4) // preferred_read_replica
					}
					b.recs()
					b.tags()
				})
				b.tags()
			})
		})
		b.tags()
	case keyListOffsets:
		if v >= 2 {
			b.skip(4)
		}
		b.arr(func() {
			b.str()
			b.arr(func() {
				b.skip(4)
				b.err()
				if v == 0 {
					b.arr(func() { b.skip(8) }) // old_style_offsets
				} else {
					b.skip(16) // timestamp, offset
				}
				if v >= 4 {
					b.skip(4) // leader_epoch
				}
				b.tags()
			})
			b.tags()
		})
		b.tags()
	case keyMetadata:
		// Topic-level error codes only: a partition's error code
		// (LEADER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE) describes the
		// cluster's state, not whether this request was served.
		if v >= 3 {
			b.skip(4)
		}
		b.arr(func() { // brokers
			b.skip(4)
			b.str() // host
			b.skip(4)
			if v >= 1 {
				b.str() // rack
			}
			b.tags()
		})
		if v >= 2 {
			b.str() // cluster_id
		}
		if v >= 1 {
			b.skip(4) // controller_id
		}
		b.arr(func() {
			b.topic(func() {
				b.err()
				b.name()
				if v >= 10 {
					b.add(opID, 0)
				}
				if v >= 1 {
					b.skip(1) // is_internal
				}
				b.arr(func() {
					b.skip(2 + 4 + 4) // error_code, partition_index, leader_id
					if v >= 7 {
						b.skip(4) // leader_epoch
					}
					b.arr(func() { b.skip(4) }) // replica_nodes
					b.arr(func() { b.skip(4) }) // isr_nodes
					if v >= 5 {
						b.arr(func() { b.skip(4) }) // offline_replicas
					}
					b.tags()
				})
				if v >= 8 {
					b.skip(4) // topic_authorized_operations
				}
				b.tags()
			})
		})
		if v >= 8 && v <= 10 {
			b.skip(4) // cluster_authorized_operations
		}
		if v >= 13 {
			b.err()
		}
		b.tags()
	case keyOffsetCommit:
		if v >= 3 {
			b.skip(4)
		}
		b.arr(func() {
			if v >= 10 {
				b.add(opID, 0)
			} else {
				b.str()
			}
			b.arr(func() {
				b.skip(4)
				b.err()
				b.tags()
			})
			b.tags()
		})
		b.tags()
	case keyOffsetFetch:
		partition := func(epoch bool) {
			b.skip(4 + 8) // partition_index, committed_offset
			if epoch {
				b.skip(4) // committed_leader_epoch
			}
			b.str() // metadata
			b.err()
			b.tags()
		}
		if v <= 7 {
			if v >= 3 {
				b.skip(4)
			}
			b.arr(func() {
				b.str()
				b.arr(func() { partition(v >= 5) })
				b.tags()
			})
			if v >= 2 {
				b.err()
			}
		} else {
			b.skip(4)
			b.arr(func() { // groups
				b.str()
				b.arr(func() {
					if v >= 10 {
						b.add(opID, 0)
					} else {
						b.str()
					}
					b.arr(func() { partition(true) })
					b.tags()
				})
				b.err()
				b.tags()
			})
		}
		b.tags()
	case keyFindCoordinator:
		if v <= 3 {
			throttleErr(1)
		} else {
			b.skip(4)
			b.arr(func() {
				b.str() // key
				b.skip(4)
				b.str() // host
				b.skip(4)
				b.err()
				b.str() // error_message
				b.tags()
			})
			b.tags()
		}
	case keyJoinGroup:
		throttleErr(2)
	case keyHeartbeat, keyLeaveGroup, keySyncGroup, keyListGroups:
		throttleErr(1)
	case keyDescribeGroups:
		if v >= 1 {
			b.skip(4)
		}
		b.arr(func() {
			b.err()
			b.stop()
		})
	case keySaslHandshake, keySaslAuthenticate, keyApiVersions:
		b.err()
		b.stop()
	case keyInitProducerID, keyAddOffsetsToTxn, keyEndTxn, keyConsumerGroupHeartbeat,
		keyDescribeCluster, keyGetTelemetrySubs, keyPushTelemetry:
		throttleErr(0)
	case keyCreateTopics:
		if v >= 2 {
			b.skip(4)
		}
		b.arr(func() {
			b.str()
			if v >= 7 {
				b.skip(16)
			}
			b.err()
			b.stop()
		})
	case keyDeleteTopics:
		if v >= 1 {
			b.skip(4)
		}
		b.arr(func() {
			b.str()
			if v >= 6 {
				b.skip(16)
			}
			b.err()
			b.stop()
		})
	default:
		return nil // outcome not decoded: counted OK
	}
	return b.p
}

// decoded says respProgram reads key's outcome.
func decoded(key int16) bool {
	switch key {
	case keyProduce, keyFetch, keyListOffsets, keyMetadata, keyOffsetCommit, keyOffsetFetch,
		keyFindCoordinator, keyJoinGroup, keyHeartbeat, keyLeaveGroup, keySyncGroup, keyListGroups,
		keyDescribeGroups, keySaslHandshake, keySaslAuthenticate, keyApiVersions, keyInitProducerID,
		keyAddOffsetsToTxn, keyEndTxn, keyConsumerGroupHeartbeat, keyDescribeCluster,
		keyGetTelemetrySubs, keyPushTelemetry, keyCreateTopics, keyDeleteTopics:
		return true
	}
	return false
}

// progs caches the programs of every known (key, version).
var reqProgs, reqProgsRecords, respProgs = func() (req, reqRecs, resp [len(apis)][][]instr) {
	for k := range apis {
		req[k] = make([][]instr, apis[k].maxVer+1)
		reqRecs[k] = make([][]instr, apis[k].maxVer+1)
		resp[k] = make([][]instr, apis[k].maxVer+1)
		for v := int16(0); v <= apis[k].maxVer; v++ {
			req[k][v] = reqProgram(int16(k), v, false)
			reqRecs[k][v] = reqProgram(int16(k), v, true)
			if decoded(int16(k)) {
				resp[k][v] = respProgram(int16(k), v)
			}
		}
	}
	return
}()
