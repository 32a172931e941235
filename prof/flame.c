/*
 * prof/flame.c — a flame graph as a self-contained SVG: one rectangle per call-path node, width
 * its inclusive energy, the root at the bottom, callers below callees (Brendan Gregg's layout),
 * each with its name (clipped to the box) and a tooltip with joules and percent.
 */
#include "prof/prof.h"

#include <errno.h>
#include <math.h>

#define WIDTH 1200.0
#define FRAME_HEIGHT 18.0
#define MARGIN 10.0
#define TITLE_HEIGHT 40.0

static unsigned depth_of(const struct prof_path_node *node)
{
	unsigned deepest = 0;

	for (const struct prof_path_node *child = node->child; child; child = child->sibling) {
		unsigned depth = depth_of(child) + 1;
		if (depth > deepest)
			deepest = depth;
	}
	return deepest;
}

static void xml_text(const char *text, FILE *out)
{
	for (; *text; text++) {
		switch (*text) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default: fputc(*text, out);
		}
	}
}

/* A warm colour from the name, so a function keeps its colour across the picture. */
static void colour(const char *name, unsigned *r, unsigned *g, unsigned *b)
{
	unsigned hash = 2166136261u;

	for (const char *c = name; *c; c++)
		hash = (hash ^ (unsigned char)*c) * 16777619u;
	*r = 205 + hash % 50;
	*g = 80 + (hash >> 8) % 130;
	*b = 40 + (hash >> 16) % 50;
}

static void draw(const struct prof_path_node *node, double x, unsigned level, double scale,
		 double total, double base_y, FILE *out)
{
	double width = node->total_joules * scale;

	if (width < 0.3)
		return;
	if (node->function) {
		double y = base_y - (level + 1) * FRAME_HEIGHT;
		unsigned r, g, b;
		colour(node->function, &r, &g, &b);
		fprintf(out, "<g><title>");
		xml_text(node->function, out);
		fprintf(out, " (%.6f J, %.2f%%)</title>", node->total_joules,
			total > 0 ? 100.0 * node->total_joules / total : 0.0);
		fprintf(out,
			"<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.1f\" rx=\"2\" "
			"fill=\"rgb(%u,%u,%u)\" stroke=\"white\" stroke-width=\"0.5\"/>",
			x, y, width, FRAME_HEIGHT - 1, r, g, b);
		/* about 7 px per character at 12 px */
		size_t fits = width > 10 ? (size_t)((width - 6) / 7.0) : 0;
		if (fits >= 3) {
			fprintf(out, "<text x=\"%.2f\" y=\"%.2f\">", x + 3, y + FRAME_HEIGHT - 5);
			char shown[256];
			size_t length = 0;
			for (const char *c = node->function; *c && length < sizeof(shown) - 3; c++)
				shown[length++] = *c;
			shown[length] = '\0';
			if (length > fits) {
				shown[fits - 2] = '.';
				shown[fits - 1] = '.';
				shown[fits] = '\0';
			}
			xml_text(shown, out);
			fputs("</text>", out);
		}
		fputs("</g>\n", out);
		level++;
	}
	double child_x = x;
	for (const struct prof_path_node *child = node->child; child; child = child->sibling) {
		draw(child, child_x, level, scale, total, base_y, out);
		child_x += child->total_joules * scale;
	}
}

int prof_report_svg(const struct prof_profile *profile, FILE *out)
{
	unsigned depth = depth_of(&profile->root);
	double height = TITLE_HEIGHT + depth * FRAME_HEIGHT + 2 * MARGIN + 20;
	double total = profile->root.total_joules;
	double scale = total > 0 ? (WIDTH - 2 * MARGIN) / total : 0;
	int d = profile->primary_domain;

	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text { font-family: monospace; font-size: 12px; fill: #000; }"
		" .title { font-size: 17px; font-family: sans-serif; }</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#fdf6e3\"/>\n",
		WIDTH, height, WIDTH, height);
	fprintf(out, "<text class=\"title\" x=\"%.0f\" y=\"24\" text-anchor=\"middle\">"
		     "Energy flame graph: ",
		WIDTH / 2);
	xml_text(profile->command ? profile->command : "?", out);
	fprintf(out, " (%s %.3f J of the program, msrd backend %s%s)</text>\n", prof_domain_name(d),
		total, profile->backend ? profile->backend : "unknown",
		profile->sim_model ? ", SIMULATED CPU" : "");
	draw(&profile->root, MARGIN, 0, scale, total, height - MARGIN - 20, out);
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">width = energy charged by CPU-time share; "
		     "other/idle (%.3f J) not shown</text>\n",
		MARGIN, height - 8, profile->other_joules[d]);
	fputs("</svg>\n", out);
	return ferror(out) ? -EIO : 0;
}
