/*
 * server/journal.c — the before-image of every register msrd changes, on disk, so that what a
 * killed msrd programmed into the hardware is put back when the next one starts.
 *
 * msrstate.c restores registers at SIGTERM from memory; a SIGKILL, a crash or a power cut loses
 * that memory while the registers keep what msrd wrote (event selects counting, counters
 * cleared). So before the first write of each register (per CPU; aliases are one register, as
 * in msrstate.c) its value is appended to a journal file and fdatasync'ed, and only then is the
 * write let through: a register the journal does not name was never written. At start msrd
 * reads a journal a previous msrd left, writes every value back, and starts an empty one; a
 * clean stop (every restore succeeded) removes it.
 *
 * The file is STATE_DIR/msr.journal (msr-safe.journal for msr-safe; with --dev-root a name
 * that carries a hash of the root, so stand-in trees never share one). It is text, one register
 * per line after a header naming the boot, the backend and the device root it belongs to:
 *
 *     haecer-msrd journal 2 boot 5f0c...-... backend msr root /
 *     cpu 0 msr 0x186 0x0000000000000000
 *     cpu 0 forget 0x186
 *
 * A "forget" line takes back the register named before it: msrd no longer owns it (a counter
 * slot the kernel reprogrammed behind msrd's back belongs to the kernel, and writing msrd's
 * before-image over it would break the kernel's perf session or NMI watchdog).
 * A torn last line (msrd died while appending it) is ignored: its register was not written yet.
 * A journal from an earlier boot (a --state-dir that outlives /run) is discarded: the reset and
 * the firmware have set every register since, and the values it names belong to a machine state
 * that is gone. One that cannot tell its boot (version 1, or "unknown") is replayed.
 * The file decides what msrd writes to the hardware at start, so it is trusted only when nobody
 * but msrd could have written it: the directory and the file must belong to root or msrd's own
 * user and be writable by nobody else, and the file is opened without following links. An
 * exclusive lock on it keeps two msrds from using one journal (one device) at once.
 *
 * The simulated CPU keeps no state across msrd runs (a new simulation starts from reset), so it
 * has no journal.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_MAGIC "haecer-msrd journal 2"
#define JOURNAL_MAX_BYTES (16u << 20) /* 1024 CPUs x hundreds of registers fit many times */
#define JOURNAL_LINE_MAX 128u

/* FNV-1a: a short, stable name for a device root. */
static uint64_t name_hash(const char *text)
{
	uint64_t hash = 0xcbf29ce484222325ull;

	for (; *text != '\0'; text++)
		hash = (hash ^ (uint8_t)*text) * 0x100000001b3ull;
	return hash;
}

/* The device root as the header names it: "/" for the real devices. */
static void root_of(const struct backend_options *options, char *root, size_t size)
{
	const char *given = options->dev_root;

	if (given == NULL || given[0] == '\0' || strcmp(given, "/") == 0) {
		snprintf(root, size, "/");
		return;
	}
	if (realpath(given, root) == NULL || strlen(root) >= size)
		snprintf(root, size, "%s", given);
}

/* The end of the first line, after the boot id: the device the journal belongs to. */
#define JOURNAL_DEVICE_FORMAT " backend %s root %s\n"

static void journal_device(const struct journal *journal, char *text, size_t size)
{
	snprintf(text, size, JOURNAL_DEVICE_FORMAT, backend_kind_name(journal->backend),
		 journal->root);
}

static void journal_header(const struct journal *journal, char *line, size_t size)
{
	snprintf(line, size, JOURNAL_MAGIC " boot %s" JOURNAL_DEVICE_FORMAT, journal->boot,
		 backend_kind_name(journal->backend), journal->root);
}

/* The kernel's id of this boot; "unknown" where /proc does not say (no reboot can be told). */
static void read_boot_id(char *boot, size_t size)
{
	FILE *file = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (file == NULL || fgets(boot, (int)size, file) == NULL || strlen(boot) < 2) {
		log_warnx("journal: no boot id in /proc/sys/kernel/random; a journal from an "
			  "earlier boot cannot be told apart");
		snprintf(boot, size, "unknown");
	}
	boot[strcspn(boot, "\n ")] = '\0';
	if (file != NULL)
		fclose(file);
}

/* What a journal's first line says about it. */
enum journal_origin {
	JOURNAL_TORN,          /* msrd died writing the first line: nothing was written after it */
	JOURNAL_FOREIGN,       /* another device's, or not a journal */
	JOURNAL_THIS_BOOT,     /* this device's, of this boot (or one that cannot be told) */
	JOURNAL_EARLIER_BOOT,  /* this device's, of an earlier boot */
};

static bool is_prefix(const char *text, size_t length, const char *whole)
{
	return length <= strlen(whole) && memcmp(text, whole, length) == 0;
}

/*
 * The first line of `text` against this device: "haecer-msrd journal 2 boot ID backend KIND root
 * PATH" or version 1's "haecer-msrd journal 1 backend KIND root PATH" (no boot id: replayed, as
 * it was). A boot id counts as another boot only when both it and this boot's are known.
 * *header_length gets the first line's length, newline included.
 */
static enum journal_origin journal_origin(const struct journal *journal, const char *text,
					  size_t length, size_t *header_length)
{
	static const char version1[] = "haecer-msrd journal 1";
	static const char version2[] = JOURNAL_MAGIC " boot ";
	const char *newline = memchr(text, '\n', length);
	const char *end = newline != NULL ? newline + 1 : text + length;
	char device[PATH_MAX + 64];
	char boot[sizeof(journal->boot)];
	const char *rest;
	size_t boot_length;

	*header_length = (size_t)(end - text);
	journal_device(journal, device, sizeof(device));
	if (newline == NULL && (is_prefix(text, length, version1) ||
				is_prefix(text, length, version2)))
		return JOURNAL_TORN;
	boot[0] = '\0';
	if (*header_length > strlen(version1) && memcmp(text, version1, strlen(version1)) == 0) {
		rest = text + strlen(version1);
	} else if (*header_length > strlen(version2) &&
		   memcmp(text, version2, strlen(version2)) == 0) {
		rest = text + strlen(version2);
		boot_length = strcspn(rest, " \n");
		if (boot_length == 0 || boot_length >= sizeof(boot))
			return newline == NULL && boot_length < sizeof(boot) ? JOURNAL_TORN
									     : JOURNAL_FOREIGN;
		memcpy(boot, rest, boot_length);
		boot[boot_length] = '\0';
		rest += boot_length;
	} else {
		return JOURNAL_FOREIGN;
	}
	if (newline == NULL)
		return is_prefix(rest, (size_t)(end - rest), device) ? JOURNAL_TORN : JOURNAL_FOREIGN;
	if ((size_t)(end - rest) != strlen(device) || memcmp(rest, device, strlen(device)) != 0)
		return JOURNAL_FOREIGN;
	if (boot[0] != '\0' && strcmp(boot, "unknown") != 0 &&
	    strcmp(journal->boot, "unknown") != 0 && strcmp(boot, journal->boot) != 0)
		return JOURNAL_EARLIER_BOOT;
	return JOURNAL_THIS_BOOT;
}

/* Whoever may write the directory or the file may make msrd write any value to any register. */
static int check_owner(const struct stat *status, const char *what, const char *path)
{
	uid_t self = geteuid();

	if (status->st_uid != 0 && status->st_uid != self) {
		log_error("journal: %s %s belongs to uid %u, not to root or uid %u", what, path,
			  (unsigned)status->st_uid, (unsigned)self);
		return -EACCES;
	}
	if ((status->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
		log_error("journal: %s %s is writable by %s (mode %04o); run chmod go-w on it", what,
			  path, (status->st_mode & S_IWOTH) ? "others" : "its group",
			  (unsigned)(status->st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

static int open_directory(const char *directory)
{
	struct stat status;
	int fd;

	if (mkdir(directory, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(directory, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &status) < 0 || check_owner(&status, "state directory", directory) < 0) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

static int open_file(struct journal *journal, int directory)
{
	struct stat status;
	int fd = openat(directory, journal->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &status) < 0 || !S_ISREG(status.st_mode) ||
	    check_owner(&status, "file", journal->path) < 0) {
		close(fd);
		return -EACCES;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int status_code = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return status_code;
	}
	return fd;
}

/* ---- replay ---- */

static char *read_all(int fd, size_t *length)
{
	struct stat status;
	char *text;
	ssize_t got;

	if (fstat(fd, &status) < 0)
		return NULL;
	if (status.st_size > (off_t)JOURNAL_MAX_BYTES) {
		log_error("journal: %lld bytes, more than the %u a journal msrd writes can have",
			  (long long)status.st_size, JOURNAL_MAX_BYTES);
		return NULL;
	}
	text = malloc((size_t)status.st_size + 1);
	if (text == NULL)
		return NULL;
	got = pread(fd, text, (size_t)status.st_size, 0);
	if (got < 0) {
		free(text);
		return NULL;
	}
	text[got] = '\0';
	*length = (size_t)got;
	return text;
}

/* One "cpu N forget 0xA" line; false for anything else. */
static bool parse_forget(const char *line, uint32_t *cpu, uint32_t *address)
{
	unsigned long long parsed_cpu, parsed_address;
	char *end;

	if (strncmp(line, "cpu ", 4) != 0)
		return false;
	errno = 0;
	parsed_cpu = strtoull(line + 4, &end, 10);
	if (end == line + 4 || strncmp(end, " forget 0x", 10) != 0)
		return false;
	line = end + 10;
	parsed_address = strtoull(line, &end, 16);
	if (end == line || *end != '\0' || errno != 0 || parsed_cpu >= MACHINE_MAX_CPUS ||
	    parsed_address > UINT32_MAX)
		return false;
	*cpu = (uint32_t)parsed_cpu;
	*address = (uint32_t)parsed_address;
	return true;
}

/* One "cpu N msr 0xA 0xV" line; false for anything else. */
static bool parse_entry(const char *line, uint32_t *cpu, uint32_t *address, uint64_t *value)
{
	unsigned long long parsed_cpu, parsed_address, parsed_value;
	char *end;

	if (strncmp(line, "cpu ", 4) != 0)
		return false;
	errno = 0;
	parsed_cpu = strtoull(line + 4, &end, 10);
	if (end == line + 4 || strncmp(end, " msr 0x", 7) != 0)
		return false;
	line = end + 7;
	parsed_address = strtoull(line, &end, 16);
	if (end == line || strncmp(end, " 0x", 3) != 0)
		return false;
	line = end + 3;
	parsed_value = strtoull(line, &end, 16);
	if (end == line || *end != '\0' || errno != 0 || parsed_cpu >= MACHINE_MAX_CPUS ||
	    parsed_address > UINT32_MAX)
		return false;
	*cpu = (uint32_t)parsed_cpu;
	*address = (uint32_t)parsed_address;
	*value = parsed_value;
	return true;
}

/* The entries after the journal's first line (`header_length` bytes) into `state` (first value
 * per register wins, as written), or into `journal->carried` for CPUs beyond `cpu_count`.
 * Returns how many lines could not be used, or -ENOMEM. */
static int parse_journal(struct journal *journal, char *text, size_t length, size_t header_length,
			 struct msrstate *state, uint32_t cpu_count)
{
	char *line = text + header_length;
	int bad = 0;

	while (line < text + length) {
		char *newline = memchr(line, '\n', (size_t)(text + length - line));
		uint32_t cpu, address;
		uint64_t value;
		if (newline == NULL) {
			log_warnx("journal: ignoring a torn last line (msrd died writing it, before "
				  "the register it names was written)");
			break;
		}
		*newline = '\0';
		if (parse_forget(line, &cpu, &address)) {
			msrstate_forget(cpu < cpu_count ? state : &journal->carried, cpu, address);
		} else if (!parse_entry(line, &cpu, &address, &value)) {
			log_warnx("journal: ignoring line \"%.*s\"", JOURNAL_LINE_MAX, line);
			bad++;
		} else if (msrstate_remember(cpu < cpu_count ? state : &journal->carried, cpu, address,
					     value) < 0) {
			return -ENOMEM;
		} else if (cpu >= cpu_count) {
			log_warnx("journal: cpu %u is not present now (%u CPUs); its MSR 0x%x is "
				  "kept for a later start", cpu, cpu_count, address);
		}
		line = newline + 1;
	}
	return bad;
}

/* What a previous msrd left: write it back. */
static int replay(struct msrd *server)
{
	struct journal *journal = &server->journal;
	struct msrstate previous;
	size_t length = 0;
	size_t failed;
	char *text = read_all(journal->fd, &length);
	enum journal_origin origin;
	size_t header_length = 0;
	int status;
	int bad;

	if (text == NULL)
		return -EIO;
	origin = length == 0 ? JOURNAL_TORN : journal_origin(journal, text, length, &header_length);
	if (origin == JOURNAL_FOREIGN) {
		char expected[PATH_MAX + 128];
		journal_header(journal, expected, sizeof(expected));
		log_error("journal: %s belongs to another device or is not a journal (its first "
			  "line is not \"%.*s\")", journal->path, (int)strlen(expected) - 1,
			  expected);
		free(text);
		return -EINVAL;
	}
	if (origin == JOURNAL_TORN || origin == JOURNAL_EARLIER_BOOT) {
		if (origin == JOURNAL_EARLIER_BOOT)
			log_notice("journal: %s was written before the machine last booted (this is "
				   "boot %s); its registers have been reset since, so none is "
				   "written back", journal->path, journal->boot);
		free(text);
		return 0;
	}
	msrstate_init(&previous, &server->machine);
	bad = parse_journal(journal, text, length, header_length, &previous,
			    server->machine.cpu_count);
	free(text);
	if (bad < 0) {
		msrstate_free(&previous);
		return bad;
	}
	log_notice("journal: the previous msrd did not stop cleanly; writing back the %zu "
		   "registers it had changed (%s)", previous.count, journal->path);
	failed = msrstate_restore(&previous, server->backend, &journal->carried);
	if (failed <= previous.count)
		log_notice("journal: %zu registers restored%s", previous.count - failed,
			   failed > 0 || bad > 0 ? ", some could not be (see above)" : "");
	status = failed <= previous.count ? 0 : -ENOMEM;
	msrstate_free(&previous);
	return status;
}

/* ---- the running journal ---- */

static int write_all(int fd, const char *text, size_t length)
{
	while (length > 0) {
		ssize_t done = write(fd, text, length);
		if (done < 0 && errno == EINTR)
			continue;
		if (done <= 0)
			return done < 0 ? -errno : -EIO;
		text += done;
		length -= (size_t)done;
	}
	return 0;
}

/* Append one entry whole or not at all (a fragment would swallow the next line); refused when
 * the file would outgrow what a starting msrd reads, or holds bytes this msrd did not write. */
static int append_line(struct journal *journal, const char *line, int length);

static int append_entry(struct journal *journal, uint32_t cpu, uint32_t address, uint64_t value)
{
	char line[JOURNAL_LINE_MAX];
	int length = snprintf(line, sizeof(line), "cpu %u msr 0x%x 0x%016" PRIx64 "\n", cpu,
			      address, value);

	return append_line(journal, line, length);
}

static int append_line(struct journal *journal, const char *line, int length)
{
	off_t end = lseek(journal->fd, 0, SEEK_CUR);
	struct stat status;
	int result;

	if (journal->broken)
		return -EIO;
	if (end < 0 || fstat(journal->fd, &status) < 0)
		return -errno;
	if ((uint64_t)status.st_size + (uint64_t)length > JOURNAL_MAX_BYTES) {
		log_error("journal: %s would grow past %u bytes, more than a starting msrd reads",
			  journal->path, JOURNAL_MAX_BYTES);
		return -EFBIG;
	}
	if (status.st_size != end) {
		log_error("journal: %s is %lld bytes long, but msrd wrote %lld of them",
			  journal->path, (long long)status.st_size, (long long)end);
		return -EIO;
	}
	result = write_all(journal->fd, line, (size_t)length);
	if (result < 0) {
		bool cut = ftruncate(journal->fd, end) == 0;
		if (lseek(journal->fd, end, SEEK_SET) < 0 || !cut) {
			log_error("journal: cannot cut a partly written line off %s; no further "
				  "register can be recorded", journal->path);
			journal->broken = true;
		}
	}
	return result;
}

/* Start the file afresh with its header and the registers still owed from before (`carried`),
 * on disk before any register is written. */
static int start_empty(struct journal *journal)
{
	char header[PATH_MAX + 128];
	int status = 0;

	journal_header(journal, header, sizeof(header));
	if (ftruncate(journal->fd, 0) < 0 || lseek(journal->fd, 0, SEEK_SET) < 0)
		return -errno;
	journal->broken = false;
	if (write_all(journal->fd, header, strlen(header)) < 0)
		return -EIO;
	for (size_t i = 0; i < journal->carried.count && status == 0; i++) {
		const struct msr_saved *owed = &journal->carried.entries[i];
		status = append_entry(journal, owed->cpu, owed->address, owed->original);
	}
	if (status < 0 || fdatasync(journal->fd) < 0)
		return -EIO;
	if (journal->carried.count > 0)
		log_warnx("journal: %zu registers could not be written back; %s keeps them for "
			  "the next start", journal->carried.count, journal->path);
	return 0;
}

static void name_journal(struct journal *journal, const struct msrd_config *config)
{
	const char *kind = backend_kind_name(journal->backend);

	if (strcmp(journal->root, "/") == 0)
		snprintf(journal->name, sizeof(journal->name), "%s.journal", kind);
	else
		snprintf(journal->name, sizeof(journal->name), "%s-%016" PRIx64 ".journal", kind,
			 name_hash(journal->root));
	snprintf(journal->path, sizeof(journal->path), "%s/%s", config->state_dir, journal->name);
}

int journal_open(struct msrd *server)
{
	const struct msrd_config *config = server->config;
	struct journal *journal = &server->journal;
	int directory;
	int status;

	*journal = (struct journal){ .fd = -1, .backend = backend_kind(server->backend) };
	if (journal->backend == BACKEND_SIM) {
		log_info("journal: none for the simulated CPU (each run starts from reset state)");
		return 0;
	}
	msrstate_init(&journal->written, &server->machine);
	msrstate_init(&journal->carried, &server->machine);
	root_of(&config->backend, journal->root, sizeof(journal->root));
	read_boot_id(journal->boot, sizeof(journal->boot));
	name_journal(journal, config);
	directory = open_directory(config->state_dir);
	if (directory < 0) {
		log_warn_errno(directory, "journal: state directory %s (--state-dir)",
			       config->state_dir);
		return directory;
	}
	status = open_file(journal, directory);
	close(directory);
	if (status < 0) {
		log_warn_errno(status, "journal: %s%s", journal->path,
			       status == -EBUSY ? ": another msrd is using this device" : "");
		return status;
	}
	journal->fd = status;
	status = replay(server);
	if (status == 0)
		status = start_empty(journal);
	if (status < 0) {
		/* Closed here so that the clean-up's journal_close keeps the file: a journal
		 * that was refused (another device's, too large) is evidence, and one whose
		 * registers were not all written back is still owed. */
		log_warn_errno(status, "journal: %s", journal->path);
		close(journal->fd);
		journal->fd = -1;
		return status;
	}
	log_info("journal: %s", journal->path);
	return 0;
}

int journal_note(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t before)
{
	struct journal *journal = &server->journal;
	int status;

	if (journal->fd < 0 || msrstate_has(&journal->written, cpu, address))
		return 0;
	status = append_entry(journal, cpu, address, before);
	if (status == 0 && fdatasync(journal->fd) < 0)
		status = -errno;
	if (status == 0)
		status = msrstate_remember(&journal->written, cpu, address, before);
	if (status < 0)
		log_warn_errno(status, "journal: recording cpu %u MSR 0x%x before writing it; the "
			       "write is refused", cpu, address);
	return status < 0 ? -EIO : 0;
}

int journal_forget(struct msrd *server, uint32_t cpu, uint32_t address)
{
	struct journal *journal = &server->journal;
	char line[JOURNAL_LINE_MAX];
	int length, status;

	if (server->parent != NULL)
		return privsep_forget(server->parent, cpu, address);
	if (journal->fd < 0 || !msrstate_has(&journal->written, cpu, address))
		return 0;
	length = snprintf(line, sizeof(line), "cpu %u forget 0x%x\n", cpu, address);
	status = append_line(journal, line, length);
	if (status == 0 && fdatasync(journal->fd) < 0)
		status = -errno;
	if (status < 0) {
		log_warn_errno(status, "journal: taking back cpu %u MSR 0x%x", cpu, address);
		return status;
	}
	msrstate_forget(&journal->written, cpu, address);
	return 0;
}

int journal_note_current(struct msrd *server, uint32_t cpu, uint32_t address)
{
	uint64_t before;
	int status;

	if (server->journal.fd < 0 || msrstate_has(&server->journal.written, cpu, address))
		return 0;
	status = backend_read(server->backend, cpu, address, &before);
	if (status < 0)
		return status;
	return journal_note(server, cpu, address, before);
}

void journal_detach(struct msrd *server)
{
	struct journal *journal = &server->journal;

	if (journal->fd >= 0)
		close(journal->fd);
	journal->fd = -1;
}

void journal_close(struct msrd *server, bool restored)
{
	struct journal *journal = &server->journal;

	if (journal->fd >= 0) {
		if (restored && journal->carried.count > 0) {
			/* What this msrd changed is back; what it could not write back at start
			 * is still owed. */
			if (start_empty(journal) < 0)
				log_warnx("journal: could not rewrite %s; it is kept as it was",
					  journal->path);
		} else if (restored) {
			/* Nothing left to put back. Removing it needs the directory: after --user
			 * it may not be ours, and an empty journal says the same. */
			if (unlink(journal->path) < 0 && ftruncate(journal->fd, 0) == 0)
				fdatasync(journal->fd);
		} else {
			log_warnx("journal: kept %s: the next msrd writes its registers back",
				  journal->path);
		}
		close(journal->fd);
	}
	msrstate_free(&journal->written);
	msrstate_free(&journal->carried);
	journal->fd = -1;
}
