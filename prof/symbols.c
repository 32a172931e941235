/*
 * prof/symbols.c — addresses to functions, inlined frames and source lines with elfutils'
 * libdwfl, from the executable mappings the kernel reported while the program ran (the program
 * is gone when the report is made, so /proc/PID/maps is not there to read).
 *
 * A return address (every call-chain entry but the first) is looked up at ip - 1: the call
 * instruction, not the one after it, which may belong to the next line or function.
 */
#include "prof/prof.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_INLINE 16u

/* The sample being unwound: what the thread callbacks answer with. */
struct unwind_state {
	const struct prof_user_stack *stack;
	uint32_t tid;
	uint64_t *ips;
	size_t count, max;
};

struct process {
	uint32_t pid;
	Dwfl *dwfl;
	bool attached;       /* dwfl_attach_state done (once per Dwfl) */
	struct unwind_state *unwind;
};

struct cached {
	uint64_t key_ip;
	uint32_t key_pid;
	bool used;
	uint8_t count;
	struct prof_frame frames[MAX_INLINE];
};

struct prof_symbols {
	struct process *processes;
	size_t process_count;
	struct cached *cache;
	size_t cache_size; /* power of two */
	size_t cache_used;
	char **strings;
	size_t string_size; /* power of two */
	size_t string_used;
};

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static uint64_t hash64(uint64_t value)
{
	value ^= value >> 33;
	value *= 0xff51afd7ed558ccdull;
	value ^= value >> 33;
	value *= 0xc4ceb9fe1a85ec53ull;
	return value ^ (value >> 33);
}

static uint64_t hash_text(const char *text)
{
	uint64_t hash = 1469598103934665603ull;

	while (*text)
		hash = (hash ^ (unsigned char)*text++) * 1099511628211ull;
	return hash;
}

const char *prof_intern(struct prof_symbols *symbols, const char *text)
{
	if (symbols->string_used * 2 >= symbols->string_size) {
		size_t size = symbols->string_size ? symbols->string_size * 2 : 1024;
		char **grown = calloc(size, sizeof(*grown));
		if (!grown)
			return "??";
		for (size_t i = 0; i < symbols->string_size; i++) {
			if (!symbols->strings[i])
				continue;
			size_t slot = hash_text(symbols->strings[i]) & (size - 1);
			while (grown[slot])
				slot = (slot + 1) & (size - 1);
			grown[slot] = symbols->strings[i];
		}
		free(symbols->strings);
		symbols->strings = grown;
		symbols->string_size = size;
	}
	size_t slot = hash_text(text) & (symbols->string_size - 1);
	while (symbols->strings[slot]) {
		if (strcmp(symbols->strings[slot], text) == 0)
			return symbols->strings[slot];
		slot = (slot + 1) & (symbols->string_size - 1);
	}
	symbols->strings[slot] = strdup(text);
	if (!symbols->strings[slot])
		return "??";
	symbols->string_used++;
	return symbols->strings[slot];
}

/* The load bias of `path` mapped at addr from file offset pgoff: the PT_LOAD that covers the
 * offset says which virtual address the mapping's first byte has in the file. */
static int load_bias(const char *path, uint64_t addr, uint64_t pgoff, uint64_t *bias, bool *dyn)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf = NULL;
	size_t count;
	int error = -ENOENT;

	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Ehdr ehdr;
	if (!elf || !gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &count) != 0) {
		error = -EINVAL;
		goto out;
	}
	*dyn = ehdr.e_type == ET_DYN;
	for (size_t i = 0; i < count; i++) {
		GElf_Phdr phdr;
		if (!gelf_getphdr(elf, (int)i, &phdr) || phdr.p_type != PT_LOAD)
			continue;
		uint64_t align = phdr.p_align > 1 ? phdr.p_align : 4096;
		uint64_t page_offset = phdr.p_offset & ~(uint64_t)4095;
		if (pgoff >= page_offset && pgoff < phdr.p_offset + phdr.p_filesz + align) {
			*bias = addr + (phdr.p_offset - pgoff) - phdr.p_vaddr;
			error = 0;
			break;
		}
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return error;
}

static Dwfl *process_dwfl(struct prof_symbols *symbols, const struct prof_data *data, uint32_t pid)
{
	for (size_t i = 0; i < symbols->process_count; i++)
		if (symbols->processes[i].pid == pid)
			return symbols->processes[i].dwfl;
	struct process *grown = realloc(symbols->processes,
					(symbols->process_count + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	symbols->processes = grown;
	Dwfl *dwfl = dwfl_begin(&callbacks);
	symbols->processes[symbols->process_count++] = (struct process){ .pid = pid, .dwfl = dwfl };
	/* (unwind state is allocated on the first unwind) */
	if (!dwfl)
		return NULL;
	dwfl_report_begin(dwfl);
	size_t offset = 8;
	uint32_t type, size;
	const void *payload;
	while (prof_data_next(data, &offset, &type, &payload, &size) > 0) {
		if (type != PROF_REC_MMAP || size <= sizeof(struct prof_mmap))
			continue;
		const struct prof_mmap *map = payload;
		if (map->pid != pid)
			continue;
		char path[4096];
		size_t length = size - sizeof(*map);
		if (length >= sizeof(path))
			continue;
		memcpy(path, map->filename, length);
		path[length] = '\0';
		if (path[0] != '/')
			continue; /* [vdso], anonymous JIT code */
		uint64_t bias = 0;
		bool dyn = false;
		if (load_bias(path, map->addr, map->pgoff, &bias, &dyn) < 0)
			continue;
		const char *name = strrchr(path, '/') + 1;
		/* A file mapped twice (rare) is reported once; libdwfl refuses overlaps. */
		dwfl_report_elf(dwfl, name, path, -1, dyn ? bias : 0, true);
	}
	dwfl_report_end(dwfl, NULL, NULL);
	return dwfl;
}

int prof_symbols_open(const struct prof_data *data, struct prof_symbols **out)
{
	struct prof_symbols *symbols = calloc(1, sizeof(*symbols));

	if (!symbols)
		return -ENOMEM;
	symbols->cache_size = 1 << 14;
	symbols->cache = calloc(symbols->cache_size, sizeof(*symbols->cache));
	if (!symbols->cache) {
		free(symbols);
		return -ENOMEM;
	}
	elf_version(EV_CURRENT);
	/* Every process that has a mapping gets its modules now (data is not kept). */
	size_t offset = 8;
	uint32_t type, size;
	const void *payload;
	while (prof_data_next(data, &offset, &type, &payload, &size) > 0)
		if (type == PROF_REC_MMAP && size >= sizeof(struct prof_mmap))
			process_dwfl(symbols, data, ((const struct prof_mmap *)payload)->pid);
	*out = symbols;
	return 0;
}

void prof_symbols_close(struct prof_symbols *symbols)
{
	if (!symbols)
		return;
	for (size_t i = 0; i < symbols->process_count; i++) {
		if (symbols->processes[i].dwfl)
			dwfl_end(symbols->processes[i].dwfl);
		free(symbols->processes[i].unwind);
	}
	free(symbols->processes);
	free(symbols->cache);
	for (size_t i = 0; i < symbols->string_size; i++)
		free(symbols->strings[i]);
	free(symbols->strings);
	free(symbols);
}

/* A relative source name is relative to the compilation directory; tools that open the file
 * (callgrind_annotate, KCachegrind) need it whole. */
static const char *whole_path(struct prof_symbols *symbols, const char *file, const char *dir)
{
	char joined[4096];

	if (!file)
		return NULL;
	if (file[0] == '/' || !dir || !dir[0])
		return prof_intern(symbols, file);
	snprintf(joined, sizeof(joined), "%s/%s", dir, file);
	return prof_intern(symbols, joined);
}

static const char *call_file(Dwarf_Die *cu, Dwarf_Die *die)
{
	Dwarf_Attribute attribute;
	Dwarf_Word index;
	Dwarf_Files *files;
	size_t count;

	if (!dwarf_attr(die, DW_AT_call_file, &attribute) ||
	    dwarf_formudata(&attribute, &index) != 0 || dwarf_getsrcfiles(cu, &files, &count) != 0)
		return NULL;
	return dwarf_filesrc(files, index, NULL, NULL);
}

static uint32_t call_line(Dwarf_Die *die)
{
	Dwarf_Attribute attribute;
	Dwarf_Word line;

	if (!dwarf_attr(die, DW_AT_call_line, &attribute) || dwarf_formudata(&attribute, &line) != 0)
		return 0;
	return (uint32_t)line;
}

/* The compilation unit holding ip when the module has no address index: clang (14) writes no
 * .debug_aranges, and libdwfl then finds no unit (eu-addr2line neither). */
static Dwarf_Die *scan_for_unit(Dwfl_Module *module, uint64_t ip, Dwarf_Addr *bias,
				Dwarf_Die *storage)
{
	Dwarf *dwarf = dwfl_module_getdwarf(module, bias);
	Dwarf_Off offset = 0, next;
	size_t header;

	if (!dwarf)
		return NULL;
	while (dwarf_next_unit(dwarf, offset, &next, &header, NULL, NULL, NULL, NULL, NULL, NULL) ==
	       0) {
		if (dwarf_offdie(dwarf, offset + header, storage) &&
		    dwarf_haspc(storage, ip - *bias) == 1)
			return storage;
		offset = next;
	}
	return NULL;
}

static size_t resolve(struct prof_symbols *symbols, Dwfl *dwfl, uint64_t ip,
		      struct prof_frame *frames, size_t max)
{
	Dwfl_Module *module = dwfl ? dwfl_addrmodule(dwfl, ip) : NULL;
	const char *file = NULL, *symbol = NULL;
	char unknown[64];
	int line = 0;
	size_t count = 0;

	if (!module) {
		snprintf(unknown, sizeof(unknown), "[unknown 0x%llx]", (unsigned long long)ip);
		frames[0] = (struct prof_frame){ .function = prof_intern(symbols, "[unknown]"),
						 .file = prof_intern(symbols, "??") };
		return 1;
	}
	Dwfl_Line *source = dwfl_module_getsrc(module, ip);
	if (source)
		file = whole_path(symbols, dwfl_lineinfo(source, NULL, &line, NULL, NULL, NULL),
				  dwfl_line_comp_dir(source));
	symbol = dwfl_module_addrname(module, ip);

	Dwarf_Addr bias = 0;
	Dwarf_Die unit;
	Dwarf_Die *cu = dwfl_module_addrdie(module, ip, &bias);
	if (!cu)
		cu = scan_for_unit(module, ip, &bias, &unit);
	if (cu && !source) {
		Dwarf_Line *unit_line = dwarf_getsrc_die(cu, ip - bias);
		Dwarf_Attribute comp_dir;
		if (unit_line && dwarf_lineno(unit_line, &line) == 0)
			file = whole_path(symbols, dwarf_linesrc(unit_line, NULL, NULL),
					  dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir,
								      &comp_dir)));
	}
	Dwarf_Die *scopes = NULL;
	int scope_count = cu ? dwarf_getscopes(cu, ip - bias, &scopes) : 0;
	const char *here_file = file;
	uint32_t here_line = line > 0 ? (uint32_t)line : 0;
	for (int i = 0; i < scope_count && count < max; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		const char *name = dwarf_diename(&scopes[i]);
		if (tag == DW_TAG_subprogram && symbol)
			name = symbol; /* the symbol table knows clones (foo.cold, foo.constprop) */
		frames[count++] = (struct prof_frame){
			.function = prof_intern(symbols, name ? name : "??"),
			.file = prof_intern(symbols, here_file ? here_file : "??"),
			.line = here_line,
			.inlined = tag == DW_TAG_inlined_subroutine,
		};
		if (tag == DW_TAG_subprogram)
			break;
		/* The next frame out is where this one was inlined. */
		Dwarf_Attribute comp_dir;
		here_file = whole_path(symbols, call_file(cu, &scopes[i]),
				       dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &comp_dir)));
		here_line = call_line(&scopes[i]);
	}
	free(scopes);
	if (count == 0 || frames[count - 1].inlined) {
		if (count == max)
			count--;
		if (!symbol) {
			const char *module_name = dwfl_module_info(module, NULL, NULL, NULL, NULL, NULL,
								   NULL, NULL);
			snprintf(unknown, sizeof(unknown), "[%s]", module_name ? module_name : "?");
			symbol = unknown;
		}
		frames[count++] = (struct prof_frame){
			.function = prof_intern(symbols, symbol),
			.file = prof_intern(symbols, here_file ? here_file : "??"),
			.line = here_line,
		};
	}
	return count;
}

/* ---- CFI unwinding of copied user stacks ---- */

static pid_t unwind_next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp)
{
	struct unwind_state *state = dwfl_arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = state;
	return (pid_t)state->tid;
}

static bool unwind_get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = dwfl_arg;
	return true;
}

/* Only the copied stack is memory we have; anything else ends the unwinding there. */
static bool unwind_memory_read(Dwfl *dwfl, Dwarf_Addr address, Dwarf_Word *result,
			       void *dwfl_arg)
{
	const struct unwind_state *state = dwfl_arg;
	uint64_t sp = state->stack->regs[7];

	(void)dwfl;
	if (address < sp || address - sp > state->stack->size ||
	    state->stack->size - (address - sp) < sizeof(*result))
		return false;
	memcpy(result, state->stack->data + (address - sp), sizeof(*result));
	return true;
}

static bool unwind_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct unwind_state *state = thread_arg;
	const uint64_t *r = state->stack->regs; /* perf: AX BX CX DX SI DI BP SP IP R8..R15 */
	/* DWARF x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
	Dwarf_Word dwarf[17] = { r[0], r[3], r[2], r[1], r[4], r[5], r[6], r[7],
				 r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16], r[8] };

	return dwfl_thread_state_registers(thread, 0, 17, dwarf);
}

static const Dwfl_Thread_Callbacks unwind_callbacks = {
	.next_thread = unwind_next_thread,
	.get_thread = unwind_get_thread,
	.memory_read = unwind_memory_read,
	.set_initial_registers = unwind_initial_registers,
};

static int unwind_frame(Dwfl_Frame *frame, void *arg)
{
	struct unwind_state *state = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(frame, &pc, &activation) || state->count == state->max)
		return DWARF_CB_ABORT;
	/* a caller's pc is its return address; the lookup takes one off for those */
	state->ips[state->count++] = pc;
	return DWARF_CB_OK;
}

size_t prof_symbols_unwind(struct prof_symbols *symbols, uint32_t pid, uint32_t tid,
			   const struct prof_user_stack *stack, uint64_t *ips, size_t max)
{
	struct process *process = NULL;

	for (size_t i = 0; i < symbols->process_count; i++)
		if (symbols->processes[i].pid == pid)
			process = &symbols->processes[i];
	if (!process || !process->dwfl)
		return 0;
	if (!process->unwind && !(process->unwind = calloc(1, sizeof(*process->unwind))))
		return 0;
	*process->unwind = (struct unwind_state){ .stack = stack, .tid = tid, .ips = ips,
						  .max = max };
	if (!process->attached) {
		if (!dwfl_attach_state(process->dwfl, NULL, (pid_t)pid, &unwind_callbacks,
				       process->unwind))
			return 0;
		process->attached = true;
	}
	/* An error at the end of the chain is the usual way it ends: keep what was found. */
	dwfl_getthread_frames(process->dwfl, (pid_t)tid, unwind_frame, process->unwind);
	return process->unwind->count;
}

size_t prof_symbols_lookup(struct prof_symbols *symbols, uint32_t pid, uint64_t ip,
			   bool return_address, struct prof_frame *frames, size_t max)
{
	uint64_t address = return_address && ip > 0 ? ip - 1 : ip;
	size_t slot = hash64(address ^ ((uint64_t)pid << 48)) & (symbols->cache_size - 1);
	struct cached *entry;

	for (;;) {
		entry = &symbols->cache[slot];
		if (!entry->used || (entry->key_ip == address && entry->key_pid == pid))
			break;
		slot = (slot + 1) & (symbols->cache_size - 1);
	}
	if (!entry->used) {
		Dwfl *dwfl = NULL;
		for (size_t i = 0; i < symbols->process_count; i++)
			if (symbols->processes[i].pid == pid)
				dwfl = symbols->processes[i].dwfl;
		if (!dwfl && symbols->process_count > 0)
			dwfl = symbols->processes[0].dwfl; /* a thread's pid before its mmaps */
		size_t count = resolve(symbols, dwfl, address, entry->frames, MAX_INLINE);
		/* The cache only grows to half full; past that, look up without keeping. */
		if (symbols->cache_used * 2 < symbols->cache_size) {
			entry->used = true;
			entry->key_ip = address;
			entry->key_pid = pid;
			entry->count = (uint8_t)count;
			symbols->cache_used++;
		} else {
			static struct cached scratch;
			scratch.count = (uint8_t)count;
			memcpy(scratch.frames, entry->frames, sizeof(scratch.frames));
			memset(entry->frames, 0, sizeof(entry->frames));
			entry = &scratch;
		}
	}
	size_t count = entry->count < max ? entry->count : max;
	memcpy(frames, entry->frames, count * sizeof(*frames));
	return count;
}
