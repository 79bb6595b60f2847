// SPDX-License-Identifier: Apache-2.0
// Readers of other programs' point formats: Tipsy and Gadget simulation snapshots, PLY point
// clouds and NumPy .npy arrays. read_points (point_io.hpp) detects these from the content; call
// these directly to insist on one format. Each gives canopy::trees::point (x, y, z, m) and applies
// the checks of point_io.hpp (finite coordinates, finite non-negative masses), throwing
// input_error(source, problem) for a bad file. parse_* take the whole file in memory (fuzzers,
// buffers); read_* stream the file through a 1 MiB buffer, converting chunk by chunk into the
// result, so a large file is never held in memory next to its points.
//
// What each accepts, exactly:
//
// Tipsy. Header: double time, int32 nbodies, ndim, nsph, ndark, nstar, then in the common padded
//   form 4 more bytes (not checked), so 28 or 32 bytes; all big-endian ("standard"/XDR) or all
//   little-endian ("native"): the byte order is the one in which ndim == 3. Then nsph gas records
//   of 12 float32 (mass, x, y, z, vx, vy, vz, rho, temp, hsmooth, metals, phi), ndark dark records
//   of 9 (mass, x, y, z, vx, vy, vz, eps, phi), nstar star records of 11 (mass, x, y, z, vx, vy,
//   vz, metals, tform, eps, phi). Counts must be non-negative with nsph + ndark + nstar == nbodies,
//   and the file exactly 28 or 32 bytes + the records (which one is decided by the size, as
//   pynbody does; the two sizes differ by 4 bytes, so a padded file missing exactly its last 4
//   bytes reads as an unpadded one, every value shifted by one float: the one truncation no
//   reader can see). Points come gas, dark, star in file order, or one family.
//
// Gadget-1/2 ("SnapFormat" 1 and 2), one file of a snapshot (num_files 0 or 1; a file of a
//   multi-file snapshot is refused rather than read as a part). Every block is a Fortran record:
//   int32 size, payload, the same int32 size. The byte order is the one in which the first record
//   marker reads 256 (format 1: the header record) or 8 (format 2: a label record "HEAD", int32,
//   in front of every block). Header (256 bytes): int32 npart[6], double mass[6], double time,
//   double redshift, int32 flag_sfr, flag_feedback, uint32 npartTotal[6], int32 flag_cooling,
//   num_files, ... (only npart, mass and num_files are used). Format 1 blocks are positional: POS,
//   VEL, ID, then MASS when any type has mass[type] == 0 and npart[type] > 0; format 2 blocks are
//   found by their labels "POS " and "MASS" in any order, others skipped. POS holds 3 float32 per
//   particle (float64 when its size says 24 per particle), MASS one float32 (or float64) per
//   particle of the types whose table mass is 0, in type order. Nothing after the blocks needed is
//   read. Points come types 0..5 in file order, or one type.
//
// PLY (format ascii 1.0, binary_little_endian 1.0, binary_big_endian 1.0). Header lines: "ply",
//   "format ...", "comment ...", "obj_info ...", "element NAME COUNT", "property TYPE NAME",
//   "property list COUNT_TYPE ITEM_TYPE NAME", "end_header" (lines may end in "\r\n"). Types:
//   char uchar short ushort int uint float double and int8 uint8 int16 uint16 int32 uint32 float32
//   float64, any of them for x, y, z and mass. The element "vertex" must have scalar x, y, z; the
//   mass is its scalar `mass` property, else `weight`, else 1. Every element (faces, edges, other
//   properties, list properties) is parsed in order and skipped, and the data must end where the
//   last element does (ascii: whitespace may follow). ASCII data is one element instance per line,
//   as the format has it: its values separated by spaces or tabs, the line ended by "\n" or
//   "\r\n"; a line with fewer or more values than its instance has is an input_error naming the
//   line (the values of one instance used to be taken across lines). Empty lines are skipped.
//
// NumPy .npy, format versions 1.0, 2.0 and 3.0: magic "\x93NUMPY", version, header length
//   (uint16, or uint32 from 2.0), a Python dict literal with exactly 'descr', 'fortran_order' and
//   'shape'. descr '<f4', '>f4', '<f8' or '>f8'; shape (N, 3) (x, y, z; mass 1) or (N, 4)
//   (x, y, z, m); fortran_order True or False. The data must be exactly N * columns * itemsize.
#pragma once

#include <canopy/trees/point.hpp>
#include <canopy/trees/point_io.hpp>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace canopy::trees {

std::vector<point> read_points_tipsy(const std::filesystem::path& path, tipsy_family family = tipsy_family::all);
std::vector<point> parse_points_tipsy(std::span<const std::byte> bytes, tipsy_family family = tipsy_family::all,
                                      std::string_view source = "<memory>");

// `type`: -1 for all particle types, else 0..5 (input_error otherwise).
std::vector<point> read_points_gadget(const std::filesystem::path& path, int type = -1);
std::vector<point> parse_points_gadget(std::span<const std::byte> bytes, int type = -1,
                                       std::string_view source = "<memory>");

std::vector<point> read_points_ply(const std::filesystem::path& path);
std::vector<point> parse_points_ply(std::span<const std::byte> bytes, std::string_view source = "<memory>");

std::vector<point> read_points_npy(const std::filesystem::path& path);
std::vector<point> parse_points_npy(std::span<const std::byte> bytes, std::string_view source = "<memory>");

}  // namespace canopy::trees
