/*
 * fuzz/seeds.c — writes the generated seed inputs of fuzz/corpus/{wire,ring,batch}/.
 *
 *   make BUILD=build build/fuzz/seeds && build/fuzz/seeds fuzz/corpus
 *
 * The seeds are what the tests send and see: one well-formed frame of every request and reply
 * of protocol v1 (encoded by proto/wire.c, as test_wire checks them), rings formatted and filled
 * by shm/ring.c, batches like the write-mask and slot tests send. fuzz/corpus/{policy,import}
 * are copies of the golden policies and allowlists (fuzz/README.md). Run once when a
 * format changes; the output is committed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"
#include "proto/wire_sim.h"
#include "shm/ring.h"

static const char *root;

static void save(const char *target, const char *name, const void *data, size_t size)
{
	char path[4096];
	FILE *file;

	snprintf(path, sizeof(path), "%s/%s/seed-%s", root, target, name);
	file = fopen(path, "wb");
	if (file == NULL || fwrite(data, 1, size, file) != size) {
		perror(path);
		exit(1);
	}
	fclose(file);
}

/* ---- wire: one frame per message ---- */

static uint8_t frame[WIRE_MAX_FRAME];

static size_t finish(struct wire_writer *writer, uint16_t op, uint8_t flags)
{
	int length = wire_frame_finish(frame, sizeof(frame), op, flags, 0, 7, writer->used);

	if (length < 0)
		exit(1);
	return (size_t)length;
}

static void start(struct wire_writer *writer)
{
	wire_writer_init(writer, frame + WIRE_HEADER_SIZE, sizeof(frame) - WIRE_HEADER_SIZE);
}

static void wire_seeds(void)
{
	static struct wire_machine_info machine = { .vendor = "GenuineIntel", .cpu_count = 4 };
	static struct wire_ring_create ring = { .major = 1, .capacity = 1024, .clock = 1,
						.counter_count = 2 };
	static struct wire_slot_ids ids = { .action = WIRE_SLOT_ENABLE, .count = 3,
					    .ids = { 1, 2, 3 } };
	struct wire_writer writer;
	uint64_t values[3] = { 1, 2, 3 };

	start(&writer);
	wire_put_hello_request(&writer, &(struct wire_hello_request){ 1, 1, 0, "seed" });
	save("wire", "hello", frame, finish(&writer, WIRE_OP_HELLO, 0));
	start(&writer);
	wire_put_hello_reply(&writer, &(struct wire_hello_reply){ .version = 1, .backend = 3 });
	save("wire", "hello-reply", frame, finish(&writer, WIRE_OP_HELLO, WIRE_FLAG_REPLY));
	start(&writer);
	save("wire", "machine-info", frame, finish(&writer, WIRE_OP_MACHINE_INFO, 0));
	start(&writer);
	wire_put_machine_info(&writer, &machine);
	save("wire", "machine-info-reply", frame,
	     finish(&writer, WIRE_OP_MACHINE_INFO, WIRE_FLAG_REPLY));
	start(&writer);
	wire_put_read_request(&writer, &(struct wire_read_request){ 0, 0x611 });
	save("wire", "read", frame, finish(&writer, WIRE_OP_READ, 0));
	start(&writer);
	wire_put_write_request(&writer, &(struct wire_write_request){ 1, 0x186, 0x4300c0 });
	save("wire", "write", frame, finish(&writer, WIRE_OP_WRITE, 0));
	start(&writer);
	wire_put_batch_header(&writer, 2);
	wire_put_batch_op(&writer, &(struct wire_batch_op){ .kind = 1, .address = 0x10 });
	wire_put_batch_op(&writer, &(struct wire_batch_op){ .kind = 2, .address = 0x186, .value = 1 });
	save("wire", "batch", frame, finish(&writer, WIRE_OP_BATCH, 0));
	start(&writer);
	wire_put_batch_header(&writer, 1);
	wire_put_batch_result(&writer, &(struct wire_batch_result){ .value = 5, .status = 0 });
	save("wire", "batch-reply", frame, finish(&writer, WIRE_OP_BATCH, WIRE_FLAG_REPLY));
	snprintf(ring.counters[0].name, WIRE_NAME_MAX, "PKG");
	snprintf(ring.counters[1].name, WIRE_NAME_MAX, "CORE");
	start(&writer);
	wire_put_ring_create(&writer, &ring);
	save("wire", "ring-create", frame, finish(&writer, WIRE_OP_RING_CREATE, 0));
	start(&writer);
	wire_put_ring_key(&writer, &(struct wire_ring_key){ 1, 2, 0 });
	save("wire", "ring-open", frame, finish(&writer, WIRE_OP_RING_OPEN, 0));
	start(&writer);
	wire_put_u32(&writer, 1);
	wire_put_u32(&writer, 0);
	wire_put_ring_entry(&writer, &(struct wire_ring_entry){ .major = 1, .capacity = 8 });
	save("wire", "ring-list-reply", frame, finish(&writer, WIRE_OP_RING_LIST, WIRE_FLAG_REPLY));
	start(&writer);
	wire_put_u64(&writer, 1000000);
	save("wire", "sim-advance", frame, finish(&writer, WIRE_OP_SIM_ADVANCE, 0));
	start(&writer);
	wire_put_sim_set_load(&writer, &(struct wire_sim_set_load){ -1, 500000 });
	save("wire", "sim-set-load", frame, finish(&writer, WIRE_OP_SIM_SET_LOAD, 0));
	start(&writer);
	wire_put_sim_truth_request(&writer, &(struct wire_sim_truth_request){ 0, 0 });
	save("wire", "sim-truth", frame, finish(&writer, WIRE_OP_SIM_ENERGY_TRUTH, 0));
	start(&writer);
	wire_put_slot_alloc(&writer, &(struct wire_slot_alloc){ 0, WIRE_SLOT_PROGRAMMABLE, -1 });
	save("wire", "slot-alloc", frame, finish(&writer, WIRE_OP_SLOT_ALLOC, 0));
	start(&writer);
	wire_put_slot(&writer, &(struct wire_slot){ .id = 1, .kind = 1, .width = 48 });
	save("wire", "slot-reply", frame, finish(&writer, WIRE_OP_SLOT_ALLOC, WIRE_FLAG_REPLY));
	start(&writer);
	wire_put_slot_program(&writer, &(struct wire_slot_program){ 1, 0x4300c0 });
	save("wire", "slot-program", frame, finish(&writer, WIRE_OP_SLOT_PROGRAM, 0));
	start(&writer);
	wire_put_slot_ids(&writer, &ids);
	save("wire", "slot-control", frame, finish(&writer, WIRE_OP_SLOT_CONTROL, 0));
	start(&writer);
	wire_put_slot_values(&writer, values, 3);
	save("wire", "slot-read-reply", frame, finish(&writer, WIRE_OP_SLOT_READ, WIRE_FLAG_REPLY));
	start(&writer);
	wire_put_energy_reading(&writer, 5, 1ull << 33);
	save("wire", "energy-reply", frame, finish(&writer, WIRE_OP_ENERGY_READ, WIRE_FLAG_REPLY));
	start(&writer);
	wire_put_energy_read_request(&writer, &(struct wire_energy_read_request){
		0, 0x611, WIRE_ENERGY_READ_REGION, 3500 });
	save("wire", "energy-read-region", frame, finish(&writer, WIRE_OP_ENERGY_READ, 0));
	start(&writer);
	wire_put_energy_grant_request(&writer, &(struct wire_energy_grant_request){ 0x611, 0 });
	save("wire", "energy-grant", frame, finish(&writer, WIRE_OP_ENERGY_GRANT, 0));
	start(&writer);
	wire_put_energy_grant(&writer, &(struct wire_energy_grant){
		0x611, WIRE_ENERGY_GRANT_COARSE | WIRE_ENERGY_GRANT_POLICY_COARSE, 1000, 2000,
		1000000, 5000000 });
	save("wire", "energy-grant-reply", frame,
	     finish(&writer, WIRE_OP_ENERGY_GRANT, WIRE_FLAG_REPLY));
	start(&writer);
	wire_put_batch_run(&writer, 1, 2);
	save("wire", "batch-run", frame, finish(&writer, WIRE_OP_BATCH_RUN, 0));
	start(&writer);
	wire_put_u32(&writer, 1);
	save("wire", "batch-release", frame, finish(&writer, WIRE_OP_BATCH_RELEASE, 0));
	start(&writer);
	wire_put_schedule_start(&writer, &(struct wire_schedule_start){
		.handle = 1, .flags = WIRE_SCHEDULE_PERSISTENT, .period_ns = 1000000, .major = 1,
		.capacity = 64 });
	save("wire", "schedule-start", frame, finish(&writer, WIRE_OP_SCHEDULE_START, 0));
	start(&writer);
	wire_put_schedule_started(&writer, &(struct wire_schedule_started){ 1, 2 });
	save("wire", "schedule-started", frame,
	     finish(&writer, WIRE_OP_SCHEDULE_START, WIRE_FLAG_REPLY));
	save("wire", "error", frame,
	     (size_t)wire_encode_error(frame, sizeof(frame), WIRE_OP_ERROR, WIRE_STATUS_MALFORMED, 7,
				       "bad frame header"));
}

/* ---- ring: byte 0, the first 512 header bytes, then commands ---- */

struct ring_seed {
	uint8_t control;
	uint8_t header[512];
	uint8_t commands[12 * 16];
};

static void command(uint8_t *at, uint8_t op, uint8_t argument, uint16_t offset, uint64_t value)
{
	at[0] = op;
	at[1] = argument;
	memcpy(at + 2, &offset, 2);
	memcpy(at + 4, &value, 8);
}

static void ring_seed(const char *name, uint32_t capacity_log2, uint32_t pushes, uint8_t flags)
{
	static struct ring_seed seed;
	struct ring_params params = {
		.major = 1, .minor = 2, .instance = 3, .capacity = 1u << capacity_log2,
		.flags = flags, .clock = RING_CLOCK_MONOTONIC_RAW, .producer_pid = 1,
		.counter_count = 2,
		.counters = { { .name = "PKG", .kind = RING_COUNTER_ENERGY, .unit_exponent = 14 },
			      { .name = "CORE", .id = 1, .kind = RING_COUNTER_ENERGY } },
	};
	struct ring_producer producer;
	size_t bytes;
	void *memory;
	size_t used = 0;

	ring_bytes_for(params.capacity, &bytes);
	if (posix_memalign(&memory, 4096, bytes) != 0 || ring_format(memory, bytes, &params) != 0 ||
	    ring_producer_use(&producer, memory, bytes) != 0)
		exit(1);
	for (uint32_t i = 0; i < pushes; i++)
		ring_push(&producer, &(struct ring_record){ .value = i, .counter_id = i & 1 });
	memset(&seed, 0, sizeof(seed));
	seed.control = (uint8_t)(capacity_log2 - 1);
	memcpy(seed.header, memory, sizeof(seed.header));
	command(seed.commands + 12 * used++, 2, 8, 0, 0);       /* consume 8 */
	command(seed.commands + 12 * used++, 4, 0, 0, 99);      /* push */
	command(seed.commands + 12 * used++, 1, 0, 128, 1000);  /* head jumps */
	command(seed.commands + 12 * used++, 2, 32, 0, 0);
	command(seed.commands + 12 * used++, 0, 0, 32, 7);      /* a slot word rewritten */
	command(seed.commands + 12 * used++, 3, 32, 0, 0);      /* final */
	save("ring", name, &seed, 1 + sizeof(seed.header) + 12 * used);
	seed.control |= 0x20; /* the same through a sealed memfd */
	save("ring", name[0] == 's' ? "small-fd" : "large-fd", &seed, 1 + sizeof(seed.header));
	free(memory);
}

/* ---- batch: machine, policy, identity, u16 length, payload, register values ---- */

static void batch_seed(const char *name, uint8_t machine, uint8_t identity,
		       const struct wire_batch_op *ops, uint32_t count, const uint64_t *current)
{
	static uint8_t seed[3 + 2 + WIRE_MAX_PAYLOAD];
	struct wire_writer writer;
	uint16_t length;

	seed[0] = machine;
	seed[1] = 0; /* the shipped default policy */
	seed[2] = identity;
	wire_writer_init(&writer, seed + 5, sizeof(seed) - 5);
	wire_put_batch_header(&writer, count);
	for (uint32_t i = 0; i < count; i++)
		wire_put_batch_op(&writer, &ops[i]);
	length = (uint16_t)writer.used;
	memcpy(seed + 3, &length, 2);
	for (uint32_t i = 0; i < count; i++) {
		wire_put_u64(&writer, current[i]);
		wire_put_u8(&writer, 0);
	}
	save("batch", name, seed, 5 + writer.used);
}

static void batch_seeds(void)
{
	const struct wire_batch_op reads[] = {
		{ .kind = WIRE_BATCH_READ, .address = 0x10 },
		{ .kind = WIRE_BATCH_ENERGY_READ, .address = 0x611 },
		{ .kind = WIRE_BATCH_SLOT_READ, .address = 1 },
		{ .kind = WIRE_BATCH_READ, .cpu = 3, .address = 0x606 },
	};
	const struct wire_batch_op writes[] = {
		{ .kind = WIRE_BATCH_WRITE, .address = 0x186, .value = 0x4300c0 },
		{ .kind = WIRE_BATCH_WRITE, .address = 0x186, .value = 0x4300c4 },
		{ .kind = WIRE_BATCH_WRITE, .address = 0x38f, .value = 0x1 },
		{ .kind = WIRE_BATCH_WRITE, .cpu = 1, .address = 0x38d, .value = 0x3 },
	};
	const struct wire_batch_op amd[] = {
		{ .kind = WIRE_BATCH_WRITE, .address = 0xC0010200, .value = 0x4300c0 },
		{ .kind = WIRE_BATCH_ENERGY_READ, .address = 0xC001029B },
		{ .kind = WIRE_BATCH_READ, .address = 0xC0010201 },
	};
	const uint64_t zeros[4] = { 0 };

	batch_seed("reads-root", 0, 0, reads, 4, zeros);
	batch_seed("reads-haecer", 0, 1, reads, 4, zeros);
	batch_seed("writes-root", 0, 0, writes, 4, zeros);
	batch_seed("writes-haecer", 0, 1, writes, 4, zeros);
	batch_seed("amd-root", 1, 0, amd, 3, zeros);
	batch_seed("amd-haecer", 1, 1, amd, 3, zeros);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds CORPUS_DIR\n");
		return 2;
	}
	root = argv[1];
	wire_seeds();
	ring_seed("small", 3, 5, RING_SINGLE_PRODUCER);
	ring_seed("large", 8, 300, 0);
	batch_seeds();
	return 0;
}
