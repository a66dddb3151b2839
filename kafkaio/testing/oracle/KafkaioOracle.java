// The Java client as an oracle for kafkaio's tests: produce and consume with Apache Kafka's
// own client (kafka-clients), printing what happened as JSON lines on stdout.
//
// Compiled by kafkaio.testing.java (javac against the kafka-clients jar that Apache Kafka's
// test broker brings); not part of kafkaio itself.
//
//   produce --bootstrap B --topic T --count N [--start I] [--key-mod M] [--compression C]
//           [--acks A] [--idempotent] [--transactional-id X --txn-size K [--abort-every A]]
//           [--linger-ms L] [--partition P] [--pad BYTES] [--quiet] [--prop k=v]...
//       record i: key "k<i % M>" (no key without --key-mod), value "v<i>" + pad bytes,
//       header "i" = "<i>". Prints {"event":"ack"} per record unless --quiet, {"event":"txn"}
//       per transaction, {"event":"done"} at the end.
//   consume --bootstrap B --topic T [--group G] [--protocol classic|consumer]
//           [--assignor NAME] [--remote-assignor NAME] [--isolation read_committed]
//           [--max-records N] [--idle-ms MS] [--commit] [--prop k=v]...
//       subscribes with --group (commits after each poll and on revocation with --commit),
//       else assigns every partition from the beginning. Prints {"event":"record"} per
//       record and {"event":"assigned"|"revoked"|"lost"} with times; stops after N records,
//       after MS without records, or when stdin closes; then {"event":"done"}.
//   share-consume --bootstrap B --topic T --group G [--max-records N] [--idle-ms MS]
//       a share consumer (KIP-932) that accepts every record; prints records with their
//       delivery count.
//   log --bootstrap B --topic T [--timeout-ms MS]
//       reads every partition from the beginning twice, read_uncommitted then
//       read_committed, each up to the end offsets it sees when it starts (the high
//       watermark, then the last stable offset): {"event":"end"} per partition and
//       isolation level, {"event":"record"} then {"event":"committed"} per record.
//   close-time --bootstrap B --topic T --group G [--protocol classic|consumer] --records N
//              [--idle-polls K,K,...] [--poll-ms MS] [--prop k=v]...
//       for each K, a new group member (group G-<i>, no auto-commit) reads the N records of T
//       from the beginning, then polls K more times for MS ms (default 100) and times its
//       close(): {"event":"close","idle_polls":K,"s":seconds} per member.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaioOracle {
    private static final Object OUT = new Object();

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw new IllegalArgumentException("usage: produce|consume|share-consume [options]");
        }
        Args args = new Args(argv);
        switch (argv[0]) {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            case "share-consume" -> shareConsume(args);
            case "log" -> log(args);
            case "close-time" -> closeTime(args);
            default -> throw new IllegalArgumentException("unknown command " + argv[0]);
        }
    }

    // -- produce -----------------------------------------------------------------------------

    static void produce(Args args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.need("bootstrap"));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.get("compression", "none"));
        props.put(ProducerConfig.ACKS_CONFIG, args.get("acks", "all"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, args.get("linger-ms", "5"));
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(args.has("idempotent")));
        String txnId = args.get("transactional-id", null);
        if (txnId != null) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
            props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        }
        args.putProps(props);
        String topic = args.need("topic");
        long count = Long.parseLong(args.need("count"));
        long start = Long.parseLong(args.get("start", "0"));
        int keyMod = Integer.parseInt(args.get("key-mod", "0"));
        int pad = Integer.parseInt(args.get("pad", "0"));
        Integer partition = args.has("partition") ? Integer.valueOf(args.get("partition", "0")) : null;
        int txnSize = Integer.parseInt(args.get("txn-size", "0"));
        int abortEvery = Integer.parseInt(args.get("abort-every", "0"));
        boolean quiet = args.has("quiet");
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (txnId != null) {
                producer.initTransactions();
            }
            long txnFirst = start;
            int txnIndex = 0;
            for (long i = start; i < start + count; i++) {
                if (txnId != null && i == txnFirst) {
                    producer.beginTransaction();
                }
                byte[] key = keyMod > 0 ? ("k" + (i % keyMod)).getBytes(StandardCharsets.UTF_8) : null;
                ProducerRecord<byte[], byte[]> record =
                        new ProducerRecord<>(topic, partition, key, value(i, pad));
                record.headers().add("i", Long.toString(i).getBytes(StandardCharsets.UTF_8));
                final long index = i;
                producer.send(record, (meta, error) -> {
                    if (error != null) {
                        failed.incrementAndGet();
                        emit("{\"event\":\"error\",\"i\":" + index + ",\"error\":" + quote(error.toString()) + "}");
                    } else {
                        acked.incrementAndGet();
                        if (!quiet) {
                            emit("{\"event\":\"ack\",\"i\":" + index + ",\"p\":" + meta.partition()
                                    + ",\"o\":" + meta.offset() + "}");
                        }
                    }
                });
                boolean last = i == start + count - 1;
                if (txnId != null && (i - txnFirst + 1 == txnSize || last)) {
                    boolean abort = abortEvery > 0 && txnIndex % abortEvery == abortEvery - 1;
                    if (abort) {
                        producer.flush();
                        producer.abortTransaction();
                    } else {
                        producer.commitTransaction();
                    }
                    emit("{\"event\":\"txn\",\"first\":" + txnFirst + ",\"last\":" + i
                            + ",\"committed\":" + !abort + "}");
                    txnFirst = i + 1;
                    txnIndex++;
                }
            }
            producer.flush();
        }
        emit("{\"event\":\"done\",\"acked\":" + acked.get() + ",\"failed\":" + failed.get() + "}");
    }

    static byte[] value(long i, int pad) {
        byte[] head = ("v" + i).getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[head.length + pad];
        System.arraycopy(head, 0, out, 0, head.length);
        for (int j = 0; j < pad; j++) {
            out[head.length + j] = (byte) ((i * 31 + j * 7) % 251);
        }
        return out;
    }

    // -- consume -------------------------------------------------------------------------------

    /** A byte-array consumer of --bootstrap that starts from the earliest offset, no auto-commit. */
    static Properties consumerProps(Args args) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.need("bootstrap"));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return props;
    }

    static void consume(Args args) throws Exception {
        Properties props = consumerProps(args);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args.get("isolation", "read_uncommitted"));
        String group = args.get("group", null);
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            String protocol = args.get("protocol", "classic");
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args.get("session-timeout-ms", "10000"));
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
                String assignor = args.get("assignor", "range");
                props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(assignor));
            } else if (args.has("remote-assignor")) {
                props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args.get("remote-assignor", "uniform"));
            }
        }
        args.putProps(props);
        String topic = args.need("topic");
        long maxRecords = Long.parseLong(args.get("max-records", "-1"));
        long idleMs = Long.parseLong(args.get("idle-ms", "-1"));
        boolean commit = args.has("commit");
        AtomicBoolean stop = new AtomicBoolean(false);
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            watchStdin(stop, consumer::wakeup);
            Map<TopicPartition, OffsetAndMetadata> consumed = new HashMap<>();
            if (group != null) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        if (commit) {
                            Map<TopicPartition, OffsetAndMetadata> mine = new HashMap<>();
                            for (TopicPartition tp : partitions) {
                                OffsetAndMetadata next = consumed.remove(tp);
                                if (next != null) {
                                    mine.put(tp, next);
                                }
                            }
                            if (!mine.isEmpty()) {
                                consumer.commitSync(mine);
                            }
                        }
                        emit(assignment("revoked", partitions));
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        emit(assignment("assigned", partitions));
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> partitions) {
                        for (TopicPartition tp : partitions) {
                            consumed.remove(tp);
                        }
                        emit(assignment("lost", partitions));
                    }
                });
            } else {
                List<TopicPartition> all = new ArrayList<>();
                for (PartitionInfo p : consumer.partitionsFor(topic)) {
                    all.add(new TopicPartition(topic, p.partition()));
                }
                consumer.assign(all);
                consumer.seekToBeginning(all);
                emit(assignment("assigned", all));
            }
            emit("{\"event\":\"started\",\"t\":" + System.currentTimeMillis() + "}");
            long lastRecordAt = System.currentTimeMillis();
            while (!stop.get() && (maxRecords < 0 || count < maxRecords)) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                long now = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    count++;
                    emit(recordJson(r, now, -1));
                    consumed.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                }
                if (!records.isEmpty()) {
                    lastRecordAt = now;
                    if (commit && group != null && !consumed.isEmpty()) {
                        try {
                            consumer.commitSync(new HashMap<>(consumed));
                        } catch (RebalanceInProgressException e) {
                            // poll to finish the rebalance; revocation commits what is owed
                        }
                    }
                } else if (idleMs >= 0 && now - lastRecordAt > idleMs) {
                    break;
                }
            }
        }
        emit("{\"event\":\"done\",\"count\":" + count + ",\"t\":" + System.currentTimeMillis() + "}");
    }

    static String assignorClass(String name) {
        return switch (name) {
            case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default -> name;
        };
    }

    // -- share-consume -------------------------------------------------------------------------

    static void shareConsume(Args args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.need("bootstrap"));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args.need("group"));
        args.putProps(props);
        long maxRecords = Long.parseLong(args.get("max-records", "-1"));
        long idleMs = Long.parseLong(args.get("idle-ms", "-1"));
        AtomicBoolean stop = new AtomicBoolean(false);
        long count = 0;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            watchStdin(stop, consumer::wakeup);
            consumer.subscribe(List.of(args.need("topic")));
            emit("{\"event\":\"started\",\"t\":" + System.currentTimeMillis() + "}");
            long lastRecordAt = System.currentTimeMillis();
            while (!stop.get() && (maxRecords < 0 || count < maxRecords)) {
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                long now = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    count++;
                    emit(recordJson(r, now, r.deliveryCount().orElse((short) -1)));
                }
                if (!records.isEmpty()) {
                    lastRecordAt = now;
                    consumer.commitSync();
                } else if (idleMs >= 0 && now - lastRecordAt > idleMs) {
                    break;
                }
            }
        }
        emit("{\"event\":\"done\",\"count\":" + count + ",\"t\":" + System.currentTimeMillis() + "}");
    }

    // -- close-time ----------------------------------------------------------------------------

    static void closeTime(Args args) throws Exception {
        String topic = args.need("topic");
        long records = Long.parseLong(args.need("records"));
        long pollMs = Long.parseLong(args.get("poll-ms", "100"));
        String[] idlePolls = args.get("idle-polls", "0").split(",");
        for (int i = 0; i < idlePolls.length; i++) {
            int idle = Integer.parseInt(idlePolls[i]);
            Properties props = consumerProps(args);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, args.need("group") + "-" + i);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args.get("protocol", "classic"));
            args.putProps(props);
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
            long nanos;
            try {
                consumer.subscribe(List.of(topic));
                long count = 0;
                long deadline = System.currentTimeMillis() + 60_000;
                while (count < records) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("read " + count + " of " + records + " records in 60 s");
                    }
                    count += consumer.poll(Duration.ofMillis(1000)).count();
                }
                for (int k = 0; k < idle; k++) {
                    consumer.poll(Duration.ofMillis(pollMs));
                }
            } finally {
                long start = System.nanoTime();
                consumer.close();
                nanos = System.nanoTime() - start;
            }
            emit("{\"event\":\"close\",\"idle_polls\":" + idle + ",\"s\":" + nanos / 1e9 + "}");
        }
    }

    // -- log ---------------------------------------------------------------------------------

    static void log(Args args) throws Exception {
        String topic = args.need("topic");
        long timeoutMs = Long.parseLong(args.get("timeout-ms", "60000"));
        for (String isolation : List.of("read_uncommitted", "read_committed")) {
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.need("bootstrap"));
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
            args.putProps(props);
            String event = isolation.equals("read_committed") ? "committed" : "record";
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
                List<TopicPartition> all = new ArrayList<>();
                for (PartitionInfo p : consumer.partitionsFor(topic)) {
                    all.add(new TopicPartition(topic, p.partition()));
                }
                consumer.assign(all);
                consumer.seekToBeginning(all);
                Map<TopicPartition, Long> ends = consumer.endOffsets(all);
                for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
                    emit("{\"event\":\"end\",\"isolation\":\"" + isolation + "\",\"p\":"
                            + e.getKey().partition() + ",\"o\":" + e.getValue() + "}");
                }
                long deadline = System.currentTimeMillis() + timeoutMs;
                while (true) {
                    boolean done = true;
                    for (TopicPartition tp : all) {
                        done &= consumer.position(tp) >= ends.get(tp);
                    }
                    if (done) {
                        break;
                    }
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException(isolation + " reader did not reach " + ends);
                    }
                    long now = System.currentTimeMillis();
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        emit(recordJson(event, r, now, -1));
                    }
                }
            }
        }
        emit("{\"event\":\"done\",\"t\":" + System.currentTimeMillis() + "}");
    }

    // -- output --------------------------------------------------------------------------------

    static String recordJson(ConsumerRecord<byte[], byte[]> r, long now, int deliveryCount) {
        return recordJson("record", r, now, deliveryCount);
    }

    static String recordJson(String event, ConsumerRecord<byte[], byte[]> r, long now, int deliveryCount) {
        StringBuilder b = new StringBuilder(160);
        b.append("{\"event\":\"").append(event).append("\",\"p\":").append(r.partition())
                .append(",\"o\":").append(r.offset())
                .append(",\"k\":").append(b64(r.key()))
                .append(",\"v\":").append(b64(r.value()))
                .append(",\"ts\":").append(r.timestamp())
                .append(",\"t\":").append(now)
                .append(",\"h\":[");
        boolean first = true;
        for (Header h : r.headers()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            b.append('[').append(quote(h.key())).append(',').append(b64(h.value())).append(']');
        }
        b.append(']');
        if (deliveryCount >= 0) {
            b.append(",\"delivery\":").append(deliveryCount);
        }
        return b.append('}').toString();
    }

    static String assignment(String event, Collection<TopicPartition> partitions) {
        StringBuilder b = new StringBuilder("{\"event\":\"").append(event).append("\",\"t\":")
                .append(System.currentTimeMillis()).append(",\"partitions\":[");
        boolean first = true;
        for (TopicPartition tp : partitions) {
            if (!first) {
                b.append(',');
            }
            first = false;
            b.append(tp.partition());
        }
        return b.append("]}").toString();
    }

    static String b64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void emit(String line) {
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static void watchStdin(AtomicBoolean stop, Runnable wakeup) {
        Thread t = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // any input but EOF is ignored
                }
            } catch (java.io.IOException ignored) {
                // treated as EOF
            }
            stop.set(true);
            wakeup.run();
        }, "stdin-watch");
        t.setDaemon(true);
        t.start();
    }

    // -- arguments -----------------------------------------------------------------------------

    static final class Args {
        private final Map<String, String> values = new HashMap<>();
        private final List<String> props = new ArrayList<>();

        Args(String[] argv) {
            for (int i = 1; i < argv.length; i++) {
                String a = argv[i];
                if (!a.startsWith("--")) {
                    throw new IllegalArgumentException("unexpected argument " + a);
                }
                String name = a.substring(2);
                boolean flag = i + 1 >= argv.length || argv[i + 1].startsWith("--");
                String v = flag ? "true" : argv[++i];
                if (name.equals("prop")) {
                    props.add(v);
                } else {
                    values.put(name, v);
                }
            }
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        String get(String name, String fallback) {
            return values.getOrDefault(name, fallback);
        }

        String need(String name) {
            String v = values.get(name);
            if (v == null) {
                throw new IllegalArgumentException("--" + name + " is required");
            }
            return v;
        }

        void putProps(Properties target) {
            for (String p : props) {
                int eq = p.indexOf('=');
                target.put(p.substring(0, eq), p.substring(eq + 1));
            }
        }
    }
}
