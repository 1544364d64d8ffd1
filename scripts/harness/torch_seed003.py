"""Seed 003's five models in PyTorch: SE-ResNeXt50 (32x4d), DeepLabV3+ (ResNet50, output stride 16), BERT-base
pre-training (MLM + NSP), Transformer base (WMT en-de, shared 37k vocabulary), CycleGAN (2 ResNet-9 generators +
2 70x70 PatchGANs). Their configurations ("full": the published one, "tiny": the same topology for CPU tests) are
model_specs.py's; ``paddle_seed003.py`` is this file for Paddle, layer for layer; the layers' initialisation is
torch_layers.py's. Each model's loss is inside it; its optimizer is torch_trainer.py's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from model_specs import (
    BERT_LN_EPS,
    BERT_MASK_BIAS,
    BOTTLENECK_EXPANSION,
    DEEPLAB_OUTPUT_STRIDE,
    GAN_LEAKY_SLOPE,
    IGNORE_INDEX,
    INIT_STD,
    TRANSFORMER_LN_EPS,
    TRANSFORMER_MASK_BIAS,
    TRANSFORMER_PAD,
    resnet_stages,
    resnext_width,
    sinusoid_table,
)
from torch import nn
from torch_layers import (
    bn2d,
    check_images,
    conv,
    embedding,
    gan_conv,
    gan_deconv,
    instance_norm,
    layer_norm,
    linear,
    normal_linear,
    shortcut,
    xavier_linear,
)


# ---------------------------------------------------------------- SE-ResNeXt50 (32x4d)
class SEModule(nn.Module):
    """Squeeze-and-excitation: global pool -> FC c->c/r -> ReLU -> FC c/r->c -> sigmoid -> scale."""

    def __init__(self, channels: int, reduction: int) -> None:
        super().__init__()
        self.fc1 = linear(channels, channels // reduction)
        self.fc2 = linear(channels // reduction, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean(dim=(2, 3))
        s = torch.sigmoid(self.fc2(F.relu(self.fc1(s))))
        return x * s[:, :, None, None]


class SEResNeXtBottleneck(nn.Module):
    """1x1 -> grouped 3x3 (cardinality groups, carries the stride) -> 1x1 (planes x 4) -> SE, + shortcut."""

    def __init__(self, in_ch: int, planes: int, cardinality: int, base_width: int, reduction: int,
                 stride: int = 1) -> None:
        super().__init__()
        width = resnext_width(planes, cardinality, base_width)
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = conv(in_ch, width, 1)
        self.bn1 = bn2d(width)
        self.conv2 = conv(width, width, 3, stride=stride, groups=cardinality)
        self.bn2 = bn2d(width)
        self.conv3 = conv(width, out_ch, 1)
        self.bn3 = bn2d(out_ch)
        self.se = SEModule(out_ch, reduction)
        self.downsample = shortcut(in_ch, out_ch, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        return F.relu(out + identity)


class SEResNeXt50(nn.Module):
    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = conv(3, cfg["stem"], 7, stride=2)
        self.bn1 = bn2d(cfg["stem"])
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            nn.Sequential(*(SEResNeXtBottleneck(in_ch, planes, cfg["cardinality"], cfg["base_width"],
                                                cfg["reduction"], stride) for in_ch, planes, stride, _ in stage))
            for stage in resnet_stages(cfg["stem"], cfg["blocks"], cfg["planes"]))
        self.fc = linear(cfg["planes"][-1] * BOTTLENECK_EXPANSION, num_classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_images(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return F.cross_entropy(self.fc(x.mean(dim=(2, 3))), labels)


# ---------------------------------------------------------------- DeepLabV3+ (ResNet50 backbone, output stride 16)
class DilatedBottleneck(nn.Module):
    """ResNet v1.5 bottleneck with a dilated 3x3 (DeepLab's backbone)."""

    def __init__(self, in_ch: int, planes: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = conv(in_ch, planes, 1)
        self.bn1 = bn2d(planes)
        self.conv2 = conv(planes, planes, 3, stride=stride, dilation=dilation)
        self.bn2 = bn2d(planes)
        self.conv3 = conv(planes, out_ch, 1)
        self.bn3 = bn2d(out_ch)
        self.downsample = shortcut(in_ch, out_ch, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


def _conv_bn_relu(in_ch: int, out_ch: int, kernel: int, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(conv(in_ch, out_ch, kernel, dilation=dilation), bn2d(out_ch), nn.ReLU())


class DeepLabV3Plus(nn.Module):
    """ResNet50 backbone with output stride 16 (layer4: stride 1, dilation 2), ASPP (1x1, 3x3 at rates 6/12/18,
    image pooling; 256 channels each, projected 1280->256), decoder: layer1 features 1x1->48, concat with the
    x4-upsampled ASPP output, two 3x3 256 convs, 1x1 classifier, bilinear x4 to the input size (as in Chen et
    al. 2018). Loss: pixel-wise softmax cross-entropy ignoring label 255."""

    OUTPUT_STRIDE = DEEPLAB_OUTPUT_STRIDE

    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = conv(3, cfg["stem"], 7, stride=2)
        self.bn1 = bn2d(cfg["stem"])
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            nn.Sequential(*(DilatedBottleneck(*block) for block in stage))
            for stage in resnet_stages(cfg["stem"], cfg["blocks"], cfg["planes"], self.OUTPUT_STRIDE))
        in_ch, low_ch = (planes * BOTTLENECK_EXPANSION for planes in (cfg["planes"][-1], cfg["planes"][0]))
        aspp = cfg["aspp"]
        self.aspp = nn.ModuleList([_conv_bn_relu(in_ch, aspp, 1)] +
                                  [_conv_bn_relu(in_ch, aspp, 3, dilation=r) for r in cfg["rates"]])
        self.aspp_pool = _conv_bn_relu(in_ch, aspp, 1)
        self.aspp_project = _conv_bn_relu(aspp * (len(cfg["rates"]) + 2), aspp, 1)
        self.low_level = _conv_bn_relu(low_ch, cfg["low_level"], 1)
        self.decoder = nn.Sequential(_conv_bn_relu(aspp + cfg["low_level"], cfg["decoder"], 3),
                                     _conv_bn_relu(cfg["decoder"], cfg["decoder"], 3))
        self.classifier = conv(cfg["decoder"], num_classes, 1, bias=True)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        check_images(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        low = self.layer1(x)
        x = self.layer4(self.layer3(self.layer2(low)))
        pooled = self.aspp_pool(x.mean(dim=(2, 3), keepdim=True))
        branches = [branch(x) for branch in self.aspp]
        branches.append(F.interpolate(pooled, size=x.shape[2:], mode="bilinear", align_corners=False))
        x = self.aspp_project(torch.cat(branches, dim=1))
        x = F.interpolate(x, size=low.shape[2:], mode="bilinear", align_corners=False)
        x = self.decoder(torch.cat([x, self.low_level(low)], dim=1))
        return F.interpolate(self.classifier(x), size=images.shape[2:], mode="bilinear", align_corners=False)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.logits(images), labels, ignore_index=IGNORE_INDEX)


# ---------------------------------------------------------------- attention blocks shared by BERT and Transformer
class MultiHeadAttention(nn.Module):
    """Separate q/k/v/out projections (the same parameters as Paddle's layer, no packed in_proj)."""

    def __init__(self, d_model: int, heads: int, dropout: float, init) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.heads, self.d_head = heads, d_model // heads
        self.q, self.k, self.v, self.out = (init(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, memory: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        b, lq, lk = query.shape[0], query.shape[1], memory.shape[1]
        q = self.q(query).view(b, lq, self.heads, self.d_head).transpose(1, 2)
        k = self.k(memory).view(b, lk, self.heads, self.d_head).transpose(1, 2)
        v = self.v(memory).view(b, lk, self.heads, self.d_head).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (self.d_head ** -0.5)
        if bias is not None:
            scores = scores + bias
        weights = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(weights, v).transpose(1, 2).reshape(b, lq, self.heads * self.d_head)
        return self.out(context)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_inner: int, dropout: float, init, activation) -> None:
        super().__init__()
        self.fc1, self.fc2 = init(d_model, d_inner), init(d_inner, d_model)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


# ---------------------------------------------------------------- BERT-base pre-training (MLM + NSP)
class BertLayer(nn.Module):
    """Post-LN encoder layer: x = LN(x + drop(attn(x))); x = LN(x + drop(ffn(x))), GELU (erf)."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h, p = cfg["hidden"], cfg["dropout"]
        self.attention = MultiHeadAttention(h, cfg["heads"], p, normal_linear)
        self.norm1 = layer_norm(h, BERT_LN_EPS)
        self.ffn = FeedForward(h, cfg["intermediate"], 0.0, normal_linear, F.gelu)
        self.norm2 = layer_norm(h, BERT_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, x, bias)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class BertPretraining(nn.Module):
    """BERT-base (Devlin et al. 2018): word + position + segment embeddings, LN, 12 post-LN layers; MLM head
    (dense + GELU + LN, decoder tied to the word embeddings + output bias) on the masked positions only, NSP head
    on the tanh pooler of [CLS]. Loss = mean MLM cross-entropy + mean NSP cross-entropy.

    forward(input_ids [B,L], token_type_ids [B,L], input_mask [B,L] (1 token, 0 padding) float32,
            masked_positions [M] (flat indices into B*L), masked_labels [M], nsp_labels [B])."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], h)
        self.position_embeddings = nn.Embedding(cfg["max_position"], h)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], h)
        for emb in (self.word_embeddings, self.position_embeddings, self.token_type_embeddings):
            nn.init.normal_(emb.weight, 0.0, INIT_STD)
        self.embedding_norm = layer_norm(h, BERT_LN_EPS)
        self.embedding_dropout = nn.Dropout(cfg["dropout"])
        self.layers = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["layers"])])
        self.pooler = normal_linear(h, h)
        self.mlm_transform = normal_linear(h, h)
        self.mlm_norm = layer_norm(h, BERT_LN_EPS)
        self.mlm_bias = nn.Parameter(torch.zeros(cfg["vocab"]))
        self.nsp = normal_linear(h, 2)

    def forward(self, input_ids, token_type_ids, input_mask, masked_positions, masked_labels, nsp_labels):
        b, length = input_ids.shape
        positions = torch.arange(length, device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))
        x = self.embedding_dropout(self.embedding_norm(x))
        bias = ((1.0 - input_mask) * BERT_MASK_BIAS)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        nsp_loss = F.cross_entropy(self.nsp(pooled), nsp_labels)
        masked = x.reshape(b * length, -1).index_select(0, masked_positions)
        masked = self.mlm_norm(F.gelu(self.mlm_transform(masked)))
        mlm_logits = torch.matmul(masked, self.word_embeddings.weight.t()) + self.mlm_bias
        return F.cross_entropy(mlm_logits, masked_labels) + nsp_loss


# ---------------------------------------------------------------- Transformer base (pre-LN, as Paddle's)
class TransformerLayer(nn.Module):
    """Pre-LN layer (Paddle's preprocess 'n', postprocess 'da'): x += drop(sublayer(LN(x))) per sublayer."""

    def __init__(self, cfg: dict, cross: bool) -> None:
        super().__init__()
        d, p = cfg["d_model"], cfg["dropout"]
        self.self_attention = MultiHeadAttention(d, cfg["heads"], p, xavier_linear)
        self.norm1 = layer_norm(d, TRANSFORMER_LN_EPS)
        self.cross_attention = MultiHeadAttention(d, cfg["heads"], p, xavier_linear) if cross else None
        self.norm_cross = layer_norm(d, TRANSFORMER_LN_EPS) if cross else None
        self.ffn = FeedForward(d, cfg["d_inner"], p, xavier_linear, F.relu)
        self.norm2 = layer_norm(d, TRANSFORMER_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x, self_bias, memory=None, memory_bias=None):
        y = self.norm1(x)
        x = x + self.dropout(self.self_attention(y, y, self_bias))
        if self.cross_attention is not None:
            x = x + self.dropout(self.cross_attention(self.norm_cross(x), memory, memory_bias))
        return x + self.dropout(self.ffn(self.norm2(x)))


class Transformer(nn.Module):
    """Transformer base (Vaswani et al. 2017) for translation, as Paddle's benchmark builds it: 6+6 pre-LN layers,
    d_model 512, 8 heads, FFN 2048, dropout 0.1, one embedding shared by source, target and the output projection
    (scaled by sqrt(d_model), sinusoidal positions), final LN on encoder and decoder. Loss: label-smoothed (0.1)
    cross-entropy summed over the non-padding target tokens / their number. Id 0 is padding.

    forward(src_ids [B,S], trg_ids [B,T] (decoder input), trg_labels [B,T])."""

    PAD = TRANSFORMER_PAD

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        d = cfg["d_model"]
        self.d_model, self.smoothing = d, cfg["label_smoothing"]
        self.embedding = embedding(cfg["vocab"], d, d ** -0.5)
        self.register_buffer("positions", torch.from_numpy(sinusoid_table(cfg["max_length"], d)), persistent=False)
        self.dropout = nn.Dropout(cfg["dropout"])
        self.encoder = nn.ModuleList([TransformerLayer(cfg, cross=False) for _ in range(cfg["layers"])])
        self.encoder_norm = layer_norm(d, TRANSFORMER_LN_EPS)
        self.decoder = nn.ModuleList([TransformerLayer(cfg, cross=True) for _ in range(cfg["layers"])])
        self.decoder_norm = layer_norm(d, TRANSFORMER_LN_EPS)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids) * (self.d_model ** 0.5) + self.positions[: ids.shape[1]][None]
        return self.dropout(x)

    def forward(self, src_ids, trg_ids, trg_labels):
        src_bias = ((src_ids == self.PAD).float() * TRANSFORMER_MASK_BIAS)[:, None, None, :]
        length = trg_ids.shape[1]
        future = torch.full((length, length), TRANSFORMER_MASK_BIAS, device=trg_ids.device)
        causal = torch.triu(future, diagonal=1)[None, None]
        x = self.embed(src_ids)
        for layer in self.encoder:
            x = layer(x, src_bias)
        memory = self.encoder_norm(x)
        y = self.embed(trg_ids)
        for layer in self.decoder:
            y = layer(y, causal, memory, src_bias)
        vocab = self.embedding.num_embeddings
        logits = torch.matmul(self.decoder_norm(y), self.embedding.weight.t()).reshape(-1, vocab)
        labels = trg_labels.reshape(-1)
        # label smoothing eps over the whole vocabulary: (1 - eps) * nll + eps * (logsumexp - mean logit); written
        # with cross_entropy + logsumexp, not log_softmax (Paddle's CPU log_softmax takes minutes at 37k classes)
        nll = F.cross_entropy(logits, labels, reduction="none")
        smooth = torch.logsumexp(logits, dim=-1) - logits.mean(dim=-1)
        loss = (1.0 - self.smoothing) * nll + self.smoothing * smooth
        weights = (labels != self.PAD).float()
        return (loss * weights).sum() / weights.sum()


# ---------------------------------------------------------------- CycleGAN
class ResnetBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), gan_conv(channels, channels, 3), instance_norm(channels), nn.ReLU(),
            nn.ReflectionPad2d(1), gan_conv(channels, channels, 3), instance_norm(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class ResnetGenerator(nn.Module):
    """c7s1-64, d128, d256, 9 x R256, u128, u64, c7s1-3 + tanh (Zhu et al. 2017; reflection padding, IN)."""

    def __init__(self, ngf: int, res_blocks: int) -> None:
        super().__init__()
        layers = [nn.ReflectionPad2d(3), gan_conv(3, ngf, 7), instance_norm(ngf), nn.ReLU()]
        for mult in (1, 2):
            layers += [gan_conv(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1),
                       instance_norm(ngf * mult * 2), nn.ReLU()]
        layers += [ResnetBlock(ngf * 4) for _ in range(res_blocks)]
        for mult in (4, 2):
            layers += [gan_deconv(ngf * mult, ngf * mult // 2), instance_norm(ngf * mult // 2), nn.ReLU()]
        layers += [nn.ReflectionPad2d(3), gan_conv(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class PatchDiscriminator(nn.Module):
    """70x70 PatchGAN: C64 (no norm), C128, C256 (stride 2), C512 (stride 1), 1-channel 4x4 output; LeakyReLU 0.2."""

    def __init__(self, ndf: int, n_layers: int) -> None:
        super().__init__()
        layers = [gan_conv(3, ndf, 4, stride=2, padding=1), nn.LeakyReLU(GAN_LEAKY_SLOPE)]
        mult = 1
        for n in range(1, n_layers + 1):
            prev, mult = mult, min(2 ** n, 8)
            layers += [gan_conv(ndf * prev, ndf * mult, 4, stride=2 if n < n_layers else 1, padding=1),
                       instance_norm(ndf * mult), nn.LeakyReLU(GAN_LEAKY_SLOPE)]
        layers.append(gan_conv(ndf * mult, 1, 4, stride=1, padding=1))
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class CycleGAN(nn.Module):
    """Two generators (G_A: A->B, G_B: B->A) and two discriminators (D_A judges B images, D_B judges A images).
    Losses (LSGAN): generators = MSE(D(fake), 1) both ways + lambda_cycle x L1 cycle both ways + lambda_identity x
    lambda_cycle x L1 identity both ways; each discriminator = (MSE(D(real), 1) + MSE(D(fake), 0)) / 2.
    ``forward`` returns the generators' loss and the fakes; ``discriminator_loss`` takes the detached fakes."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.lambda_cycle, self.lambda_identity = cfg["lambda_cycle"], cfg["lambda_identity"]
        self.g_a = ResnetGenerator(cfg["ngf"], cfg["res_blocks"])
        self.g_b = ResnetGenerator(cfg["ngf"], cfg["res_blocks"])
        self.d_a = PatchDiscriminator(cfg["ndf"], cfg["d_layers"])
        self.d_b = PatchDiscriminator(cfg["ndf"], cfg["d_layers"])

    def generator_parameters(self):
        return [*self.g_a.parameters(), *self.g_b.parameters()]

    def discriminator_parameters(self):
        return [*self.d_a.parameters(), *self.d_b.parameters()]

    @staticmethod
    def _gan(prediction: torch.Tensor, target: float) -> torch.Tensor:
        return ((prediction - target) ** 2).mean()

    def forward(self, real_a: torch.Tensor, real_b: torch.Tensor):
        fake_b, fake_a = self.g_a(real_a), self.g_b(real_b)
        cycle = (self.g_b(fake_b) - real_a).abs().mean() + (self.g_a(fake_a) - real_b).abs().mean()
        identity = (self.g_a(real_b) - real_b).abs().mean() + (self.g_b(real_a) - real_a).abs().mean()
        loss = (self._gan(self.d_a(fake_b), 1.0) + self._gan(self.d_b(fake_a), 1.0)
                + self.lambda_cycle * cycle + self.lambda_cycle * self.lambda_identity * identity)
        return loss, fake_a, fake_b

    def discriminator_loss(self, real_a, real_b, fake_a, fake_b) -> torch.Tensor:
        loss_a = (self._gan(self.d_a(real_b), 1.0) + self._gan(self.d_a(fake_b), 0.0)) * 0.5
        loss_b = (self._gan(self.d_b(real_a), 1.0) + self._gan(self.d_b(fake_a), 0.0)) * 0.5
        return loss_a + loss_b


# model_specs.build_model builds them: (classes, configuration) for the first two, else (configuration)
SEED003 = {"se_resnext50": SEResNeXt50, "deeplabv3p": DeepLabV3Plus, "bert": BertPretraining,
           "transformer": Transformer, "cyclegan": CycleGAN}
